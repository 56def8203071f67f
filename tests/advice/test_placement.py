"""The smallest placement with headroom, and p95s kept in buckets."""

from __future__ import annotations

from falcon_gpu.advice import quantile
from falcon_gpu.advice.placement import Need, held_fraction, smallest
from falcon_gpu.advice.profiles import MigProfile, profile_name

GIB = 1 << 30
H100 = tuple(
    MigProfile(i, name, slices, mib << 20, sms, n)
    for i, name, slices, mib, sms, n in (
        (0, "1g.10gb", 1, 9984, 16, 7),
        (7, "1g.10gb+me", 1, 9984, 16, 1),
        (9, "1g.20gb", 1, 20096, 26, 4),
        (1, "2g.20gb", 2, 20096, 32, 3),
        (2, "3g.40gb", 3, 40448, 60, 2),
        (3, "4g.40gb", 4, 40448, 64, 1),
        (4, "7g.80gb", 7, 81152, 132, 1),
    )
)
TOTAL = 80 * GIB


def need(peak: float, p95: float, sm: float | None) -> Need:
    return Need(round(peak * GIB), round(p95 * GIB), sm)


def test_the_peak_must_fit_as_it_was_and_the_p95_with_headroom() -> None:
    assert smallest(need(9, 7.5, 0.10), TOTAL, H100).name == "1g.10gb"
    assert smallest(need(9, 9, 0.10), TOTAL, H100).name == "1g.20gb"  # 9 x 1.2 > 9.75 GiB
    assert smallest(need(9, 9, 0.10), TOTAL, H100, headroom=0.0).name == "1g.10gb"
    assert smallest(need(10, 5, 0.05), TOTAL, H100).name == "1g.20gb"  # the peak alone is too big


def test_compute_picks_a_larger_profile_and_the_whole_gpu_is_said_as_such() -> None:
    assert smallest(need(5, 5, 0.30), TOTAL, H100).name == "3g.40gb"
    assert smallest(need(70, 70, 0.5), TOTAL, H100).name == "gpu"
    assert smallest(need(45, 45, 0.5), TOTAL, H100).name == "gpu"  # 7g.80gb is the GPU


def test_without_profiles_shares_then_the_gpu() -> None:
    assert smallest(need(6, 6, 0.05), TOTAL, ()).name == "shared-1/8"
    assert smallest(need(6, 6, 0.2), TOTAL, ()).name == "shared-1/4"
    assert smallest(need(30, 30, 0.1), TOTAL, ()).name == "shared-1/2"
    assert smallest(need(30, 30, 0.1), None, ()).name == "gpu"  # memory unknown: nothing smaller


def test_held_fraction_of_a_mig_job() -> None:
    assert held_fraction("3g.40gb", H100) == 0.5
    assert held_fraction("MIG 1g.10gb", H100) == 1 / 7
    assert held_fraction(None, H100) == 1.0


def test_profile_names() -> None:
    assert profile_name(b"MIG 1g.10gb", 1, 9984) == "1g.10gb"
    assert profile_name("MIG 1g.10gb+me", 1, 9984) == "1g.10gb+me"
    assert profile_name(None, 3, 40448) == "3g.40gb"  # v1 struct: no name, NVIDIA's rule


def test_p95_in_buckets_is_within_two_percent_above() -> None:
    hist: dict[int, int] = {}
    for used in [8 * GIB] * 19 + [16 * GIB]:
        quantile.add(hist, quantile.memory_bucket(used))
    p95 = quantile.memory_bound(quantile.quantile_bucket(hist) or 0)
    assert 8 * GIB <= p95 <= 8 * GIB * 1.02
    assert quantile.ratio_bucket(0.121) == 13 and quantile.ratio_bucket(0.10) == 10
    assert quantile.quantile_bucket({}) is None
