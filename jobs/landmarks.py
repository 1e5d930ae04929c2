"""The three NYC tourist hotspots the enrichment operator chooses from (Gesscale's workload, ICCCN 2021).

Coordinates are decimal degrees (WGS84) of each site's centre as published on its Wikipedia page. The
distance is the Euclidean distance in degrees on (longitude, latitude), as in the paper's operator; it ranks
the landmarks, it is not a length in km.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Landmark:
    """A named point: `name` is what the enriched record carries."""

    name: str
    lon: float
    lat: float


LANDMARKS: tuple[Landmark, ...] = (
    Landmark("times_square", -73.9855, 40.7580),  # Times Square, 40°45′29″N 73°59′08″W
    Landmark("central_park", -73.9656, 40.7826),  # Central Park, 40°46′57″N 73°57′56″W
    Landmark("brooklyn_bridge", -73.9964, 40.7056),  # Brooklyn Bridge, 40°42′20″N 73°59′47″W
)
