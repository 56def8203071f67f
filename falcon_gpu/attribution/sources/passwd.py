"""Source ``passwd``: user names for the uids of Slurm jobs, from the host's passwd file.

A Slurm job's cgroup gives its owner's uid (:mod:`falcon_gpu.attribution.slurm_cgroup`);
the name is in the host's ``/etc/passwd`` (``passwd_file``: in a container, mount the
host's read-only and point the setting at it). Read here, off the hot path, and only
again when its modification time changes; a cycle only looks names up. Never NSS or
LDAP: a directory service is a network call, and a uid without a local entry simply
gets no ``user`` label. Expected where the file exists; one that exists but cannot be
read fails the refresh and the last names are kept.
"""

from __future__ import annotations

from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.source import EMPTY, SourceContext, SourceError, SourceView
from falcon_gpu.checks import FAIL, OK, SKIP, Row

ROW = "user names (passwd)"


class UsersView(SourceView):
    def __init__(self, users: dict[int, str]) -> None:
        self.users = users

    def user_name(self, uid: int) -> str | None:
        return self.users.get(uid)


def parse_passwd(text: str) -> dict[int, str]:
    """uid -> name from passwd(5) lines (``name:x:uid:gid:…``); the first name of a uid wins."""
    users: dict[int, str] = {}
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) < 3 or not fields[0] or line.startswith(("#", "+", "-")):
            continue
        try:
            uid = int(fields[2])
        except ValueError:
            continue
        users.setdefault(uid, fields[0])
    return users


class PasswdSource:
    name = "passwd"
    min_gap: float | None = None

    def __init__(self, settings: AttributionSettings) -> None:
        self._settings = settings
        self._path = settings.passwd_file
        self.period = settings.refresh_period
        self._mtime: float | None = None
        self._view: SourceView = EMPTY

    def expected(self) -> bool:
        return self._path.exists()

    def refresh(self) -> None:
        try:
            mtime = self._path.stat().st_mtime
            if mtime == self._mtime:
                return
            text = self._path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SourceError(
                f"cannot read {self._path} ({exc.strerror}): mount the host's /etc/passwd read-only "
                "or set passwd_file; Slurm jobs keep their uid but lose the user label meanwhile"
            ) from None
        self._view, self._mtime = UsersView(parse_passwd(text)), mtime

    def recovered(self) -> str:
        return f"user names in {self._path} readable again"

    def view(self) -> SourceView:
        return self._view

    def diagnose(self) -> tuple[list[Row], SourceView]:
        if not self.expected():
            return [(ROW, SKIP, f"{self._path} does not exist here")], EMPTY
        probe = PasswdSource(self._settings)
        try:
            probe.refresh()
        except SourceError as exc:
            return [(ROW, FAIL, str(exc))], EMPTY
        view = probe.view()
        count = len(view.users) if isinstance(view, UsersView) else 0
        return [(ROW, OK, f"{count} users in {self._path}")], view

    def close(self) -> None:
        pass


def build(context: SourceContext) -> PasswdSource:
    return PasswdSource(context.settings)
