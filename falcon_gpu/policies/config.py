"""The ``[[policies]]`` tables (CONTRACT section 8): one violation condition per policy.

Validated at start like every setting: a policy with no condition, two conditions,
an unknown key or a bad value exits 2 naming the policy and the key. A policy
watches every GPU unless ``gpus`` lists NVML indexes, UUIDs or model globs.
"""

from __future__ import annotations

import fnmatch
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

CONDITIONS = (
    "temperature_above",
    "power_above",
    "ecc_uncorrected",
    "xid",
    "retired_pages_above",
    "pcie_replays_per_minute_above",
    "remapped_rows_failed",
    "health_fail",
)
HEALTH_CHECKS = (
    "ecc",
    "retired_pages",
    "remapped_rows",
    "xid",
    "pcie",
    "thermal",
    "power",
    "inforom",
    "lost",
)


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    temperature_above: float | None = Field(None, gt=0, le=200, description="GPU °C")
    power_above: float | None = Field(None, gt=0, le=10000, description="watts")
    ecc_uncorrected: bool | None = None
    xid: list[int] | None = Field(None, min_length=1)
    retired_pages_above: int | None = Field(None, ge=0)
    pcie_replays_per_minute_above: float | None = Field(None, ge=0)
    remapped_rows_failed: bool | None = None
    health_fail: list[str] | None = Field(None, min_length=1)
    gpus: list[str] = Field(default_factory=list, description="indexes, UUIDs or model globs; [] = all")
    for_: float = Field(0.0, alias="for", ge=0, le=86400, description="seconds the condition must hold")
    hold_down: float = Field(
        60.0, ge=0, le=86400, description="seconds the condition must stay clear before it resolves"
    )
    severity: Literal["info", "warning", "critical"] = "warning"
    alertmanager: list[str] = Field(default_factory=list)
    webhook: str | None = None

    @field_validator("alertmanager")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            _check_url(url)
        return [u.rstrip("/") for u in urls]

    @field_validator("webhook")
    @classmethod
    def _webhook(cls, url: str | None) -> str | None:
        if url is not None:
            _check_url(url)
        return url

    @field_validator("health_fail")
    @classmethod
    def _checks(cls, checks: list[str] | None) -> list[str] | None:
        for check in checks or ():
            if check not in HEALTH_CHECKS:
                raise ValueError(f"unknown health check {check!r}; one of: {', '.join(HEALTH_CHECKS)}")
        return checks

    @field_validator("xid")
    @classmethod
    def _xids(cls, xids: list[int] | None) -> list[int] | None:
        if xids is not None and any(x <= 0 for x in xids):
            raise ValueError("XID codes are positive integers")
        return xids

    @model_validator(mode="after")
    def _one_condition(self) -> PolicyConfig:
        given = [c for c in CONDITIONS if getattr(self, c) not in (None, False)]
        if len(given) != 1:
            raise ValueError(
                "needs exactly one condition, one of: {', '.join(CONDITIONS)}"
                + (f" (it has {', '.join(given)})" if given else "")
            )
        return self

    @cached_property
    def condition(self) -> str:
        """The one condition key this policy sets (asked every cycle per GPU: computed once)."""
        return next(c for c in CONDITIONS if getattr(self, c) not in (None, False))

    def watches(self, index: int, uuid: str, model: str) -> bool:
        """Does this policy apply to the GPU with this index, UUID and model name?"""
        if not self.gpus:
            return True
        return any(g == str(index) or g == uuid or fnmatch.fnmatchcase(model, g) for g in self.gpus)


def _check_url(url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{url!r} is not an http:// or https:// URL")


def check_policies(value: Any) -> Any:
    """Validate each ``[[policies]]`` table, naming the policy and the key in the message
    (pydantic alone would say ``policies.3.for``)."""
    if not isinstance(value, list):
        return value  # pydantic says "should be a list"
    out: list[PolicyConfig] = []
    for i, raw in enumerate(value):
        name = raw.get("name") if isinstance(raw, dict) else None
        label = f"policy {name!r}" if isinstance(name, str) else f"policy #{i + 1}"
        try:
            policy = PolicyConfig.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(_problem(e) for e in exc.errors())
            raise ValueError(f"{label}: {problems}") from None
        if any(p.name == policy.name for p in out):
            raise ValueError(f"two policies are named {policy.name!r}; give each a distinct name")
        out.append(policy)
    return out


def _problem(e: Any) -> str:
    key = ".".join(str(p) for p in e["loc"])
    if e["type"] == "extra_forbidden":
        return f"unknown key {key!r}"
    msg = str(e["msg"]).removeprefix("Value error, ")
    return f"key {key!r}: {msg}" if key else msg
