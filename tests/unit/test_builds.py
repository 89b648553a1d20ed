"""The build registry, build announcements and the checks built on them: registering a tree,
refusing what is not a runnable server, choosing the Debian version, telling which allocator a
server loaded, and `validate`'s check of build: against what the pool's workers announced."""

from __future__ import annotations

import tarfile
import threading
import time
from pathlib import Path

import pytest

from services.collector.consumer import Collector
from services.common.messages.builds import BuildInfo, BuildRecord
from services.common.errors import BuildError, TargetError
from services.common.messages.announcements import WorkerBuilds
from services.common.messages.codec import decode
from services.common.spec.targets import ManagedTarget
from services.common.spec.loading import load_spec_source
from services.common.bus.stub import StubBroker
from services.common.config import Settings
from services.scheduler import preflight
from services.scheduler.build_check import check_builds
from services.worker.target import builds as reg
from services.worker.target import managed_server, managed_template

SHA = "a" * 64
FAKE_SERVER = "#!/bin/sh\necho \"$0  Ver 10.11.99-MariaDB-test for debian-linux-gnu on x86_64 (test)\"\n"


def fake_tree(root: Path, server: str = FAKE_SERVER) -> Path:
    """A build tree whose sbin/mariadbd prints a version like the real one."""
    (root / "sbin").mkdir(parents=True)
    (root / "bin").mkdir()
    binary = root / "sbin" / "mariadbd"
    binary.write_text(server)
    binary.chmod(0o755)
    return root


def test_a_directory_build_is_registered_listed_and_removed_without_touching_the_directory(tmp_path):
    """`--dir` records the tree where it is, with the version the server prints and its sha256;
    removing the build leaves the operator's directory alone."""
    tree = fake_tree(tmp_path / "src")
    r = reg.Registry(tmp_path / "builds")
    rec = r.add_dir("mine", tree)
    assert (rec.source, rec.version, rec.basedir) == ("dir", "10.11.99-MariaDB-test", str(tree.resolve()))
    assert rec.server_sha256 == reg.sha256_of(tree / "sbin" / "mariadbd")
    assert [b.name for b in r.list()] == ["mine"] and r.get("mine") == rec
    with pytest.raises(BuildError, match="already registered"):
        r.add_dir("mine", tree)
    r.remove("mine")
    assert r.list() == [] and (tree / "sbin" / "mariadbd").is_file()


def test_a_directory_build_rebuilt_in_place_runs_with_the_version_it_prints_now(tmp_path):
    """A ``dir`` build rebuilt after registration (new binary, new sha256) is run and reported
    with the version its server prints now, not the one recorded at registration."""
    tree = fake_tree(tmp_path / "src")
    r = reg.Registry(tmp_path / "builds")
    r.add_dir("mine", tree)
    target = ManagedTarget(kind="managed", name="m", build="mine")
    assert managed_template.find_build(target, r).version == "10.11.99-MariaDB-test"
    (tree / "sbin" / "mariadbd").write_text(FAKE_SERVER.replace("10.11.99", "10.11.100") + "# rebuilt\n")
    build = managed_template.find_build(target, r)
    assert build.version == "10.11.100-MariaDB-test"
    assert build.server_sha256 == reg.sha256_of(tree / "sbin" / "mariadbd")
    # Announced to the pool as it is now, too.
    mine = next(b for b in r.infos() if b.name == "mine")
    assert (mine.version, mine.server_sha256) == (build.version, build.server_sha256)


def test_the_system_servers_version_follows_an_upgrade_of_its_binary(tmp_path, monkeypatch):
    """After an apt upgrade replaced the system server, the worker announces the new version
    (the cache is keyed on the binary's size and mtime, not kept for the process's life)."""
    binary = fake_tree(tmp_path / "sys") / "sbin" / "mariadbd"
    monkeypatch.setattr(reg.server_binary, "system_binary", lambda: binary)
    assert reg.system_info().version == "10.11.99-MariaDB-test"
    binary.write_text(FAKE_SERVER.replace("10.11.99", "10.11.101") + "# upgraded\n")
    info = reg.system_info()
    assert info.version == "10.11.101-MariaDB-test" and info.server_sha256 == reg.sha256_of(binary)


def test_a_tarball_build_is_extracted_into_the_registry(tmp_path):
    """`--tarball` extracts the tree under the registry and finds the server in its top directory."""
    tree = fake_tree(tmp_path / "mariadb-10.11.99-linux-x86_64")
    tarball = tmp_path / "mariadb.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        tf.add(tree, arcname=tree.name)
    r = reg.Registry(tmp_path / "builds")
    rec = r.add_tarball("tb", tarball)
    assert rec.binary == str(tmp_path / "builds" / "tb" / "tree" / tree.name / "sbin" / "mariadbd")
    assert Path(rec.binary).is_file() and rec.origin == "mariadb.tar.gz"
    r.remove("tb")
    assert not (tmp_path / "builds" / "tb").exists()


def test_a_tree_whose_server_does_not_run_is_not_registered(tmp_path):
    """A server that fails `--version` (or a tree without one) leaves nothing in the registry."""
    broken = fake_tree(tmp_path / "broken", "#!/bin/sh\necho 'cannot open shared object' >&2\nexit 127\n")
    r = reg.Registry(tmp_path / "builds")
    with pytest.raises(BuildError, match="--version failed .exit 127.: cannot open shared object"):
        r.add_dir("broken", broken)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BuildError, match="no server binary"):
        r.add_dir("empty", tmp_path / "empty")
    assert r.list() == [] and [p.name for p in (tmp_path / "builds").iterdir() if not p.name.startswith(".lock")] == []


@pytest.mark.parametrize("name", ["system", "../etc", "a b", ""])
def test_bad_build_names_are_refused(tmp_path, name):
    """The system server's name and anything that is not a plain name are refused."""
    with pytest.raises(BuildError):
        reg.Registry(tmp_path / "builds").add_dir(name, fake_tree(tmp_path / "t"))


def test_an_unregistered_build_is_named_with_the_registered_ones(tmp_path):
    """get() says which builds there are and how to register the missing one."""
    r = reg.Registry(tmp_path / "builds")
    r.add_dir("a", fake_tree(tmp_path / "t"))
    with pytest.raises(BuildError) as e:
        r.get("b")
    assert str(e.value) == ("build 'b' is not registered on this worker (registered: a); register it with: "
                            "worker builds add b --debian VERSION | --tarball FILE | --dir PATH")


MADISON = """mariadb-server-core | 1:10.11.19-0+deb12u1 | http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
mariadb-server-core | 1:10.11.18-0+deb12u1 | http://deb.debian.org/debian bookworm/main amd64 Packages
"""


def test_debian_versions_are_chosen_exactly():
    """An upstream version picks its one Debian version; a full one is taken as is; an absent one
    names what the index holds."""
    available = reg.parse_madison(MADISON)
    assert available == ["1:10.11.19-0+deb12u1", "1:10.11.18-0+deb12u1"]
    assert reg.debian_version("10.11.18", available) == "1:10.11.18-0+deb12u1"
    assert reg.debian_version("1:10.11.19-0+deb12u1", available) == "1:10.11.19-0+deb12u1"
    with pytest.raises(BuildError, match=r"no version 10.11.17 .* \(available: 1:10.11.19-0\+deb12u1, 1:10.11.18"):
        reg.debian_version("10.11.17", available)
    with pytest.raises(BuildError, match="give the full Debian version"):
        reg.debian_version("10.11.18", ["1:10.11.18-0+deb12u1", "1:10.11.18-0+deb12u2"])


def test_version_is_read_from_the_servers_banner():
    assert reg.parse_version("/usr/sbin/mariadbd  Ver 10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64") == \
        "10.11.18-MariaDB-0+deb12u1"
    assert reg.parse_version("mysqld  Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)") == "8.0.36"
    assert reg.parse_version("garbage") is None


MAPS = """7f1c2a000000-7f1c2a021000 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c2b000000-7f1c2b040000 r-xp 00000000 08:01 5678 {lib}
"""


@pytest.mark.parametrize("lib, expected", [
    ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "jemalloc"),
    ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10", "tcmalloc"),
    ("/usr/lib/x86_64-linux-gnu/libm.so.6", "glibc"),
])
def test_the_loaded_allocator_is_read_from_the_memory_map(lib, expected):
    assert managed_server.loaded_allocator(MAPS.format(lib=lib)) == expected


def test_a_missing_allocator_library_names_its_package(tmp_path):
    """A worker without libtcmalloc-minimal4 fails the run saying which package to install."""
    assert managed_server.allocator_library("glibc", (str(tmp_path),)) == ""
    with pytest.raises(TargetError) as e:
        managed_server.allocator_library("tcmalloc", (str(tmp_path),))
    assert e.value.field == "malloc" and "Debian package libtcmalloc-minimal4" in e.value.message
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")
    assert managed_server.allocator_library("jemalloc", (str(tmp_path),)) == str(tmp_path / "libjemalloc.so.2")


def spec_with(tmp_path, *targets: str, pool: str = "rack1"):
    p = tmp_path / "spec.yaml"
    p.write_text(f"name: b\npool: {pool}\ntargets:\n" + "".join(f"  - {t}\n" for t in targets)
                 + "workloads: [oltp_point_select]\nthreads: [1]\nduration: 5s\n")
    return load_spec_source(str(p))


def info(name: str) -> BuildInfo:
    return BuildInfo(name=name, version="10.11.18-MariaDB", server_sha256=SHA, source="debian")


def announcement(host: str, *names: str) -> WorkerBuilds:
    return WorkerBuilds(worker=f"{host}-1", host=host, pool="rack1", builds=[info(n) for n in names], at=1.0)


def test_a_campaign_on_several_pools_needs_its_builds_on_every_pool(tmp_path):
    """Every pool measures every cell: a build only one pool's workers have is an error naming the other."""
    p = tmp_path / "spec.yaml"
    p.write_text("name: b\npools: [suse, rhel]\ntargets:\n  - {kind: managed, name: a, build: old}\n"
                 "workloads: [oltp_point_select]\nthreads: [1]\nduration: 5s\n")
    spec, source = load_spec_source(str(p))
    now = time.time()
    by_pool = {"suse": [announcement("h1", "old").model_copy(update={"pool": "suse", "at": now})],
               "rhel": [announcement("h2", "other").model_copy(update={"pool": "rhel", "at": now})]}
    asked: list[str] = []

    def announced(settings, pool):
        asked.append(pool)
        return by_pool[pool]

    errors, _ = preflight.build_errors(spec, Settings(), source, announced)
    assert asked == ["suse", "rhel"]
    assert [e.message.split(" (")[0] for e in errors] == ["build 'old' is not registered on any worker of pool 'rhel'"]


def test_validate_refuses_a_build_no_worker_of_the_pool_announced(tmp_path):
    """A build no host of the pool has is an error at targets[i].build listing what the pool
    has; one some hosts lack is a note; targets without build: are not checked."""
    spec, source = spec_with(tmp_path, "{kind: managed, name: a, build: old}", "{kind: managed, name: b, build: new}",
                             "{kind: managed, name: c}")
    errors, notes = check_builds(spec, source, [announcement("h1", "old"), announcement("h2", "old", "other")])
    assert [e.render(source.name) for e in errors] == [
        f"{source.name}:5: targets[1].build: build 'new' is not registered on any worker of pool 'rack1' "
        "(announced: old, other); register it on each worker: worker builds add new --debian VERSION | "
        "--tarball FILE | --dir PATH"]
    assert notes == []
    errors, notes = check_builds(spec, source, [announcement("h1", "old", "new"), announcement("h2", "old")])
    assert errors == [] and notes == ["targets[1] (b): build new is not on h2 (pool rack1); runs taken there fail"]
    errors, _ = check_builds(spec, source, [])
    assert [e.path for e in errors] == ["targets[0].build", "targets[1].build"]
    assert "no worker of pool 'rack1' has announced its builds yet" in errors[0].message


def test_a_spec_names_a_build_never_a_path(tmp_path):
    """binary and basedir are gone from managed targets, with a message saying what to do instead."""
    with pytest.raises(Exception) as e:
        spec_with(tmp_path, "{kind: managed, name: a, basedir: /opt/mariadb}")
    assert "targets[0].basedir: a spec names no path on a worker" in str(e.value)
    spec, _ = spec_with(tmp_path, "{kind: managed, name: a, build: mariadb-10.11.18, malloc: tcmalloc}")
    t = spec.targets[0]
    assert isinstance(t, ManagedTarget) and (t.build, t.malloc) == ("mariadb-10.11.18", "tcmalloc")
    with pytest.raises(Exception, match="targets.0.managed.malloc|malloc"):
        spec_with(tmp_path, "{kind: managed, name: a, malloc: hoard}")


def test_build_records_and_announcements_round_trip():
    """The registry's record and the workers' announcement are versioned and decode as written."""
    rec = BuildRecord(name="x", source="debian", origin="o", basedir="/b", binary="/b/sbin/mariadbd", version="v",
                      server_sha256=SHA, added_at=1.0)
    assert BuildRecord.model_validate_json(rec.encode()) == rec and '"schema": "benchfleet.build/1"' in rec.encode()
    msg = announcement("h1", "x")
    assert decode(msg.encode()) == msg


def test_the_collector_records_announcements_and_acks_them():
    """A worker's announcement on the results queue is kept by the store, never counted as a result."""
    broker = StubBroker()
    kept: list[WorkerBuilds] = []

    class Workers:
        def record_builds(self, msg):
            kept.append(msg)

        def announcements(self):
            return []

    class Results:
        def recent(self, campaigns):
            return []

    class Runs:
        def overdue(self, now, grace_s):
            return []

        def fail(self, run_id, campaign_id, reason, cell=None, by=None):
            return False

        def ended_at(self, campaign_id):
            return None

    class Store:
        workers, results, runs = Workers(), Results(), Runs()

        def reachable(self):
            return True

        def close(self):
            pass

    with broker.bus("worker") as bus:
        bus.declare(("default",))
        bus.publish_result(announcement("h1", "old").encode())
    c = Collector(connect=broker.bus, open_store=Store, pools=("default",), backoff_s=0.01)
    t = threading.Thread(target=c.run_forever, daemon=True)
    t.start()
    try:
        broker.join(broker.names.results)
    finally:
        c.stop()
        t.join(10)
    assert [k.names() for k in kept] == [["old"]] and c.stored == 0
    assert broker.unacked() == 0 and broker.messages(broker.names.dead) == []


def test_validate_ignores_builds_of_hosts_that_stopped_announcing(tmp_path):
    """A host whose last build announcement is older than the TTL (decommissioned) vouches for no
    build: a build only it had is an error, with a note naming the host; TTL 0 keeps every host."""
    spec, source = spec_with(tmp_path, "{kind: managed, name: a, build: old}")
    stale = announcement("h-gone", "old")  # at 1.0
    fresh_one = WorkerBuilds(worker="h1-1", host="h1", pool="rack1", builds=[info("other")], at=5000.0)
    errors, notes = check_builds(spec, source, [stale, fresh_one], now=5100.0, ttl_s=900)
    assert [e.path for e in errors] == ["targets[0].build"] and "(announced: other)" in errors[0].message
    assert errors[0].message.endswith("; builds of host h-gone ignored: last announced 85 min ago, more than "
                                      "BENCHFLEET_ANNOUNCE_TTL_S (900 s); its workers are not running")
    assert notes == ["builds of host h-gone ignored: last announced 85 min ago, more than BENCHFLEET_ANNOUNCE_TTL_S "
                     "(900 s); its workers are not running"]
    errors, notes = check_builds(spec, source, [stale, fresh_one], now=5100.0, ttl_s=0)
    assert errors == [] and notes == ["targets[0] (a): build old is not on h1 (pool rack1); runs taken there fail"]
