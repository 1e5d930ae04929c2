"""Every command and YAML block of README.md and docs/*.md carries a check marker, and is checked as it says
(tests/README.md, "Docs examples"): `run` blocks run as written, `dry-run` blocks are parsed and their files,
targets and options looked up, YAML blocks are loaded by the program's own loader, `skip` blocks show their
reason. The blocks of a page are checked in page order in one scratch copy of the repository's inputs, as a
reader copying them from a fresh clone would run them."""

from __future__ import annotations

import functools
import re
import secrets
import shlex
import shutil
from pathlib import Path

import pytest
import typer
import typer.main
import yaml

from gesscale.cli import app, harden, main
from gesscale.errors import UserError
from gesscale.policies import base as policy_base
from gesscale.policies.base import parse_policy_list
from tests.docs_blocks import (
    ROOT,
    Block,
    all_blocks,
    argv_of,
    blocks_of,
    command_lines,
    docs_pages,
    inline_commands,
    is_synopsis,
    problems,
)

BLOCKS = all_blocks()
COPIED = ("inventory", "scenarios", "experiments")  # inputs a block may copy or change: copied
LINKED = ("playbooks", "benchmarks", "jobs", "manifests", "docker", "Makefile", "Dockerfile", "pyproject.toml")
# Paths under these folders, named on a command line, are inputs: they must exist when the line is checked.
INPUT_DIRS = ("scenarios/", "inventory/", "experiments/", "playbooks/", "benchmarks/", "jobs/")


def test_every_command_and_yaml_block_is_fenced_and_marked() -> None:
    assert len(BLOCKS) > 50, "README.md and docs/ hold more blocks than this: is the parser broken?"
    assert not problems(BLOCKS), "\n".join(problems(BLOCKS))


def test_an_unmarked_block_is_reported(tmp_path: Path) -> None:
    """The check above fails on each kind of unmarked block, and accepts the marked and the non-command ones."""
    page = tmp_path / "page.md"
    text = ("# A page\n\n```sh\ngesscale --help\n```\n\n```yaml\nname: x\n```\n\n```\nmake setup\n```\n\n"
            "```text\ngesscale simulate\n```\n\n    gesscale options\n\n<!-- check: skip -->\n```sh\nkubectl get\n```\n"
            "\n<!-- check: run -->\n```sh\ngesscale --help\n```\n\n```text\nsome output\n```\n\n"
            "<!-- check: skip: needs a cluster -->\n```sh\nkubectl get nodes\n```\n")
    found = problems(blocks_of(page, text))
    assert [p.split(":")[1] for p in found] == ["3", "7", "11", "15", "19", "22"], found
    assert "indented code block" in found[4] and "without a reason" in found[5]


def of(page: Path) -> list[Block]:
    return [b for b in BLOCKS if b.page == page]


# ---- options: every gesscale line, whatever its marker, names options its command has ----

@functools.cache
def command_tree() -> object:
    return harden(typer.main.get_command(app))


def command_of(argv: list[str]) -> tuple[object, list[str], list[str]]:
    """The click command an argv (without `gesscale`) names, its path, and the words after it."""
    cmd = command_tree()
    path = ["gesscale"]
    while argv and argv[0] in (getattr(cmd, "commands", None) or {}):
        cmd = cmd.commands[argv[0]]  # type: ignore[attr-defined]
        path, argv = [*path, argv[0]], argv[1:]
    return cmd, path, argv


def unknown_options(line: str) -> list[str]:
    """Options on a gesscale line (synopsis brackets and choices allowed) that its command does not have."""
    words = [w.strip("[]()") for w in re.split(r"[\s|]+", line)]
    start = next(i for i, w in enumerate(words) if w.endswith("gesscale"))
    cmd, _path, rest = command_of(words[start + 1:])
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"-h", "--help"}  # type: ignore[attr-defined]
    used = {w.split("=")[0] for w in rest if re.fullmatch(r"--?[a-zA-Z][\w-]*(=.*)?", w)}
    return sorted(used - known)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.marker and not b.is_yaml], ids=lambda b: b.where)
def test_every_gesscale_line_uses_options_that_exist(block: Block) -> None:
    for line in command_lines(block.body):
        if re.search(r"(^|\s)(\S*/)?gesscale\s", line + " ") and not line.startswith(("#", "git ")):
            assert not unknown_options(line), f"{block.where}: {line}: {unknown_options(line)} unknown"


def missing_inputs(text: str) -> list[str]:
    """The repository paths (under INPUT_DIRS, no placeholder) a quoted command names that do not exist."""
    values = (w.split("=", 1)[-1].strip("[]()'\"").split(":")[0] for w in text.split())
    return [v for v in values if v.startswith(INPUT_DIRS) and not re.search(r"[<A-Z]", v) and not (ROOT / v).exists()]


def test_every_gesscale_command_in_the_text_uses_options_and_files_that_exist() -> None:
    """The commands quoted in running text and tables (`gesscale simulate --seeds 5 ...`) too."""
    spans = [span for page in docs_pages() for span in inline_commands(page)]
    assert len(spans) > 100, "README.md and docs/ quote more commands than this: is the parser broken?"
    wrong = [f"{where}: {text}: {unknown_options(text) or missing_inputs(text)}" for where, text in spans
             if unknown_options(text) or missing_inputs(text)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.marker == "skip"], ids=lambda b: b.where)
def test_skipped_blocks_say_why(block: Block) -> None:
    """A block marked skip names a reason (shown by `pytest -rs`); an empty or placeholder one fails."""
    reason = block.detail.strip()
    assert len(reason) >= 8 and reason.lower() not in {"todo", "tbd", "later", "skip", "n/a"}, \
        f"{block.where}: 'skip' needs a reason a reader can act on, got {reason!r}"
    pytest.skip(f"{block.where}: {reason}")


# ---- run and dry-run, page by page ----

@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's inputs as the current directory: the folders a block may change copied, the rest linked."""
    for name in COPIED:
        shutil.copytree(ROOT / name, tmp_path / name)
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    for var in ("GESSCALE_K3S_TOKEN", "GESSCALE_MQTT_PASSWORD", "GESSCALE_JOB_TOKEN", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def check_inputs_exist(argv: list[str], where: str) -> None:
    for word in argv[1:]:
        value = word.split("=", 1)[-1]
        if value.startswith(INPUT_DIRS):
            assert Path(value.split(":")[0]).exists(), f"{where}: {value} does not exist"


def check_gesscale(argv: list[str], marker: str, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    """run: the command runs and exits 0. dry-run: typer parses the line (types, choices, required options, the
    files its options must find) without running the command."""
    if marker == "run" or "--help" in argv or "-h" in argv:
        code = main(argv[1:])
        out, err = capsys.readouterr()
        assert code == 0, f"{where}: {shlex.join(argv)} exited {code}\n{err}"
        return
    cmd, path, rest = command_of(argv[1:])
    assert not hasattr(cmd, "commands"), f"{where}: {shlex.join(argv)} names a command group, not a command"
    ctx = cmd.make_context(" ".join(path), list(rest))  # type: ignore[attr-defined]
    for name in ("policies", "policy"):  # the policy ids, checked as the command will (a plug-in file is loaded)
        if isinstance(ctx.params.get(name), str):
            parse_policy_list(ctx.params[name])


def check_python(argv: list[str], where: str) -> None:
    """A benchmark or script: it exists and its source defines every option the line uses."""
    script = Path(argv[1])
    assert script.is_file(), f"{where}: {script} does not exist"
    source = script.read_text()
    for opt in (w for w in argv[2:] if w.startswith("--")):
        assert f'"{opt}"' in source, f"{where}: {script} has no option {opt}"


def check_line(line: str, marker: str, where: str, monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> None:
    """One command line of a run or dry-run block, as a shell would take it here."""
    if is_synopsis(line):
        assert marker == "dry-run" and "gesscale" in line, f"{where}: only a dry-run gesscale line may be a synopsis"
        assert not unknown_options(line), f"{where}: {line}: {unknown_options(line)} unknown"
        return
    assert not re.search(r"[|;&<>`]|\$\(", line.replace("$(openssl rand -hex", "")), \
        f"{where}: {line}: the test runs no shell; mark the block skip, with why"
    argv = argv_of(line)
    check_inputs_exist(argv[:-1] if argv[0] == "cp" else argv, where)  # cp's target is made
    word = argv[0]
    if word == "export":
        name, _, value = line.removeprefix("export ").partition("=")
        size = re.fullmatch(r"\$\(openssl rand -hex (\d+)\)", value)
        monkeypatch.setenv(name, secrets.token_hex(int(size.group(1))) if size else value)
    elif word == "cp":
        src, dst = Path(argv[-2]), Path(argv[-1])
        (shutil.copytree if "-r" in argv else shutil.copyfile)(src, dst)
    elif word == "gesscale":
        check_gesscale(argv, marker, where, capsys)
    elif word == "make" and marker == "dry-run":
        targets = re.findall(r"^([\w-]+):", Path("Makefile").read_text(), re.M)
        assert all(t in targets for t in argv[1:] if "=" not in t), f"{where}: {line}: no such target"
    elif word == "flock" and marker == "dry-run":
        check_line(shlex.join(argv[2:]), marker, where, monkeypatch, capsys)
    elif word == "python" and marker == "dry-run":
        check_python(argv, where)
    elif word == "ansible-playbook" and marker == "dry-run":
        for value in (w for w in argv[1:] if not w.startswith("-")):
            assert Path(value).exists(), f"{where}: {value} does not exist"
    else:
        pytest.fail(f"{where}: the test has no way to {marker} {word!r}; mark the block skip, with why")


def load_yaml_block(block: Block) -> None:
    """A YAML block, loaded by the loader the program uses for its kind (the marker's detail)."""
    from gesscale.experiment.spec import load_spec
    from gesscale.latency_map import load_latency_map
    from gesscale.scenario import load_scenario
    from netem.hosts import load_inventory

    kind, _, shipped = block.detail.partition(" ")
    if shipped:  # `dry-run: scenario scenarios/pi10-taxi.yaml`: the block shows that file, as it is
        assert yaml.safe_load(block.body) == yaml.safe_load(Path(shipped).read_text()), \
            f"{block.where}: the block differs from {shipped}"
    path = Path(f"doc-{kind}.yaml")
    body = block.body
    if kind == "scenario-part":  # keys of a scenario: merged into the shipped taxi scenario
        base = yaml.safe_load(Path("scenarios/pi10-taxi.yaml").read_text())
        body = yaml.safe_dump({**base, **yaml.safe_load(body)})
    path.write_text(body)
    loaders = {"scenario": load_scenario, "scenario-part": load_scenario, "latency-map": load_latency_map,
               "experiment": load_spec, "inventory": load_inventory}
    assert kind in loaders, f"{block.where}: a YAML block says its kind: dry-run: one of {sorted(loaders)}"
    loaders[kind](path)


PAGES = sorted({b.page for b in BLOCKS if b.marker in ("run", "dry-run")})


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_of_a_page_work_as_marked(page: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # A plug-in policy a dry-run loads is registered in this test only (every built-in one registered first).
    policy_base.policy_ids()
    monkeypatch.setattr(policy_base, "_REGISTRY", dict(policy_base._REGISTRY))
    for block in of(page):
        named = re.match(r"# ([\w./-]+\.py)\n", block.body)
        if block.lang == "python" and named:  # a file the page's commands use (`# my_policy.py`): written
            Path(named.group(1)).write_text(block.body)
        if block.marker not in ("run", "dry-run"):
            continue
        if block.is_yaml:
            assert block.marker == "dry-run", f"{block.where}: a YAML block is dry-run (loaded) or skip"
            load_yaml_block(block)
            continue
        # `run: fake-api`: run against the fake Kubernetes API by tests/test_guide_pi_live.py; parsed here
        marker = "dry-run" if block.detail == "fake-api" else block.marker
        for line in command_lines(block.body):
            check_line(line, marker, block.where, monkeypatch, capsys)


CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


@pytest.mark.parametrize(("marker", "line", "error"), [
    ("dry-run", "gesscale simulate -s scenarios/no-such.yaml -n 1", AssertionError),  # a missing input
    ("dry-run", "gesscale simulate -s scenarios/pi10-taxi.yaml --no-such-flag", CLICK_ERROR),  # typer refuses it
    ("dry-run", "gesscale compare -p gesscale,no-such-policy -n 1", UserError),  # refused as the command would
    ("dry-run", "gesscale netem", AssertionError),  # a group, not a command
    ("dry-run", "make no-such-target", AssertionError),
    ("dry-run", "kubectl get nodes", pytest.fail.Exception),  # nothing to check it by: must be skip
    ("run", "gesscale simulate -s scenarios/pi10-taxi.yaml --control-period 0", AssertionError),  # exit 2
    ("run", "gesscale simulate -s scenarios/pi10-taxi.yaml -n 1 | head", AssertionError),  # no shell here
])
def test_a_wrong_example_fails(marker: str, line: str, error: type[BaseException], workspace: Path,
                               monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The checks themselves: each kind of broken example is caught."""
    policy_base.policy_ids()
    monkeypatch.setattr(policy_base, "_REGISTRY", dict(policy_base._REGISTRY))
    with pytest.raises(error):
        check_line(line, marker, "page.md:1", monkeypatch, capsys)
