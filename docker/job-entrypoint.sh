#!/bin/sh
# Entry point of the job image (Dockerfile, target `job`).
#
# The driver Deployment sets its own command (`gesscale job run ...`), so this script only matters for the
# executor pods Spark's Kubernetes allocator creates: it starts their container with the single argument
# `executor` and describes the executor in environment variables (SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, ...;
# names as in the spark-kubernetes jar's Constants). Spark's own images ship an entrypoint for this; the pip
# distribution of pyspark does not, hence this one. Any other command is run as given.
set -eu

if [ "${1:-}" != "executor" ]; then
    exec "$@"
fi

# JVM options Spark passes one per variable, SPARK_JAVA_OPT_0, _1, ... (values may hold spaces).
set --
i=0
while eval "[ -n \"\${SPARK_JAVA_OPT_${i}+set}\" ]"; do
    eval "set -- \"\$@\" \"\${SPARK_JAVA_OPT_${i}}\""
    i=$((i + 1))
done

exec java \
    -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
    "$@" \
    -cp "${SPARK_HOME}/jars/*" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "${SPARK_DRIVER_URL}" \
    --executor-id "${SPARK_EXECUTOR_ID}" \
    --cores "${SPARK_EXECUTOR_CORES}" \
    --app-id "${SPARK_APPLICATION_ID}" \
    --hostname "${SPARK_EXECUTOR_POD_IP}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
    --podName "${SPARK_EXECUTOR_POD_NAME}"
