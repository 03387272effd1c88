"""No output ever replaces an input (``storage.paths``): the same file, a hard link, a symbolic
link, a sidecar's name, an existing file without --overwrite, a folder someone else made, the root
folder; and a failed write (a pseudo or read-only file system, a full disk) leaves nothing behind.

Every refusal is exit code 2 and one line naming the path; the inputs are byte for byte what they
were (SHA-256 before and after) and still open as recordings."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from storage.errors import StorageError
from storage.parts import parts_dir
from storage.paths import SIDECARS, OutputError, atomic_dir, atomic_file, check_output, check_run_output
from storage.reader import open_run_file
from tui.cli import main

TOML = """
name = "tiny"
seed = 5
dt_s = 300
duration_h = 2

[hall]
system = "trn3-gen2"
ultraservers = 1
ultraservers_per_row = 1
"""


def invoke(*args: object) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def refused(args: list[object], *needles: str, code_: int = 2) -> str:
    """Refused in one line with exit ``code_`` (2: the output given is wrong; 74: the file
    system could not take it)."""
    code, _, err = invoke(*args)
    assert code == code_, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("twin: error: "), err
    for n in needles:
        assert n in err, err
    return err


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def still_a_recording(p: Path, sha: str) -> None:
    assert digest(p) == sha
    open_run_file(p).close()  # also checks that every part the file lists is in FILE.parts


def copy_recording(src: Path, dest: Path) -> Path:
    """A recording is its file and its parts folder (``FILE.parts``): copy both."""
    shutil.copy(src, dest)
    shutil.copytree(parts_dir(src), parts_dir(dest))
    return dest


def tree(p: Path) -> list[tuple[str, bytes]] | None:
    """Every file under ``p`` with its bytes (``None``: nothing there)."""
    if not os.path.lexists(p):
        return None
    return sorted((str(f.relative_to(p)), f.read_bytes()) for f in p.rglob("*") if f.is_file())


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from scenarios.runner import run
    from scenarios.spec import parse

    out = tmp_path_factory.mktemp("rec") / "week.duckdb"
    run(parse(TOML, "tiny.toml"), TOML, out, duration_s=3600)
    return out


@pytest.fixture
def rec(recording: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the recording in this test's folder, and its digest."""
    p = copy_recording(recording, tmp_path / "week.duckdb")
    return p, digest(p)


# ---------------------------------------------------------------- an output onto an input
def test_report_onto_its_input_is_refused_even_with_overwrite(rec: tuple[Path, str], tmp_path: Path) -> None:
    p, sha = rec
    refused(["report", p, "--out", p, "--overwrite"], str(p), "is the input")
    (tmp_path / "hard.html").hardlink_to(p)
    refused(["report", p, "--out", tmp_path / "hard.html", "--overwrite"], "hard.html", "a link to it")
    (tmp_path / "soft.html").symlink_to(p)
    refused(["report", p, "--out", tmp_path / "soft.html", "--overwrite"], "soft.html", "is the input")
    still_a_recording(p, sha)


def test_sql_out_onto_its_input_is_refused(rec: tuple[Path, str], tmp_path: Path) -> None:
    p, sha = rec
    for flags in ([], ["--overwrite"]):
        refused(["sql", p, "SELECT 1", "--format", "csv", "--out", p, *flags], "is the input")
    (tmp_path / "hard.csv").hardlink_to(p)
    refused(["sql", p, "SELECT 1", "--format", "csv", "--out", tmp_path / "hard.csv", "--overwrite"], "link")
    (tmp_path / "soft.csv").symlink_to(p)
    refused(["sql", p, "SELECT 1", "--format", "csv", "--out", tmp_path / "soft.csv", "--overwrite"], "input")
    still_a_recording(p, sha)


def test_sql_out_needs_overwrite_to_replace_a_file(rec: tuple[Path, str], tmp_path: Path) -> None:
    p, _ = rec
    other = tmp_path / "other.csv"
    other.write_text("keep me")
    refused(["sql", p, "SELECT 1 AS one", "--format", "csv", "--out", other], "already exists", "--overwrite")
    assert other.read_text() == "keep me"
    code, _, err = invoke("sql", p, "SELECT 1 AS one", "--format", "csv", "--out", other, "--overwrite")
    assert code == 0, err
    assert other.read_text().split() == ['"one"', "1"]
    # Only the output is new in the folder: no temporary file left.
    assert sorted(x.name for x in tmp_path.iterdir()) == ["other.csv", "week.duckdb", "week.duckdb.parts"]


def test_rerun_and_run_onto_their_inputs_are_refused(rec: tuple[Path, str], tmp_path: Path) -> None:
    p, sha = rec
    refused(["rerun", p, "--out", p, "--overwrite"], "is the input")
    (tmp_path / "again.duckdb").hardlink_to(p)
    refused(["rerun", p, "--out", tmp_path / "again.duckdb", "--overwrite"], "a link to it")
    still_a_recording(p, sha)
    scen = tmp_path / "tiny.toml"
    scen.write_text(TOML)
    refused(["run", scen, "--out", scen, "--overwrite"], "tiny.toml", "is the input")
    assert scen.read_text() == TOML


def test_export_into_its_input_or_a_sidecar_is_refused(rec: tuple[Path, str], tmp_path: Path) -> None:
    p, sha = rec
    refused(["export", p, p], "week.duckdb")  # Click refuses a file as DIR first
    for suffix in SIDECARS:
        side = Path(f"{p}{suffix}")
        before = tree(side)  # the parts folder is there (the recording's rows), the others not
        assert (before is not None) == (suffix == ".parts")
        refused(["export", p, side], f"week.duckdb{suffix}", "sidecar")
        assert tree(side) == before
    # Nor into one: a folder inside the parts folder.
    parts = parts_dir(p)
    before = tree(parts)
    refused(["export", p, parts / "pq"], "inside the .parts sidecar", "week.duckdb")
    assert tree(parts) == before
    still_a_recording(p, sha)


@pytest.mark.parametrize("suffix", SIDECARS)
def test_sidecar_names_of_a_recording_are_reserved(
    rec: tuple[Path, str], tmp_path: Path, suffix: str
) -> None:
    """``X.live``, ``X.lock``, ``X.parts``, ``X.tmp``, ``X.wal`` belong to the recording X: no
    command writes there, whether X is its input or not."""
    p, sha = rec
    side = f"{p}{suffix}"
    before = tree(Path(side))  # only X.parts exists: the recording's rows
    scen = tmp_path / "tiny.toml"
    scen.write_text(TOML)
    refused(["report", p, "--out", side], "sidecar", "week.duckdb")
    refused(["sql", p, "SELECT 1", "--format", "csv", "--out", side], "sidecar")
    refused(["run", scen, "--out", side, "--hours", "1"], "sidecar")
    refused(["--scenario", scen, "--out", side], "sidecar")  # the live session, before its screen
    other = copy_recording(p, tmp_path / "other.duckdb")
    refused(["rerun", other, "--out", side], "sidecar", "week.duckdb")
    assert tree(Path(side)) == before and (before is not None) == (suffix == ".parts")
    still_a_recording(p, sha)


def test_no_output_goes_into_a_recordings_parts_folder(rec: tuple[Path, str], tmp_path: Path) -> None:
    """An output inside ``X.parts`` would be taken for X's parts, or delete them: refused whether
    X is the command's input or not, and X's parts stay as they were."""
    p, sha = rec
    parts = parts_dir(p)
    before = tree(parts)
    run_folder = next(parts.iterdir())
    scen = tmp_path / "tiny.toml"
    scen.write_text(TOML)
    other = copy_recording(p, tmp_path / "other.duckdb")
    refused(["report", p, "--out", parts / "r.html"], "inside the .parts sidecar", "week.duckdb")
    refused(["report", other, "--out", run_folder / "r.html"], "sidecar", "week.duckdb")
    refused(["sql", other, "SELECT 1", "--format", "csv", "--out", run_folder / "x.csv"], "sidecar")
    refused(["run", scen, "--out", parts / "new.duckdb", "--hours", "1"], "sidecar", "week.duckdb")
    refused(["export", other, run_folder / "pq"], "sidecar", "week.duckdb")
    assert tree(parts) == before
    still_a_recording(p, sha)


def test_a_run_never_takes_a_parts_folder_it_did_not_write(tmp_path: Path) -> None:
    """A folder named like a run output's parts folder but holding someone's files is refused and
    kept; a parts folder holding only what runs write (a killed run's) is taken over."""
    scen = tmp_path / "tiny.toml"
    scen.write_text(TOML)
    out = tmp_path / "w.duckdb"
    theirs = parts_dir(out)
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    refused(["run", scen, "--out", out, "--hours", "1"], "w.duckdb.parts", "notes.txt", "move it away")
    assert tree(theirs) == [("notes.txt", b"mine")] and not out.exists()
    (theirs / "notes.txt").unlink()
    # What a killed run leaves: a run folder with a part no file lists.
    stale = theirs / "run_id=old" / "table=factory_ts" / "part-000000001-0.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"PAR1")
    code, _, err = invoke("run", scen, "--out", out, "--hours", "1")
    assert code == 0, err
    assert not (theirs / "run_id=old").exists()  # removed with its part
    con = open_run_file(out)
    try:
        assert con.sql("SELECT count(*) FROM factory_ts").fetchall() == [(12,)]
    finally:
        con.close()


def test_a_sidecar_is_removed_only_when_it_is_provably_a_leftover(tmp_path: Path) -> None:
    """``export week.duckdb week.duckdb.live`` used to be accepted, and the next run on
    week.duckdb deleted that folder. A run beside a foreign X.live or X.lock is refused and the
    folder or file kept; a run's own leftover (its manifest names the file, the lock holds a
    process id) is reused."""
    from storage.live import LivePublisher
    from storage.manifest import MANIFEST

    out = tmp_path / "w.duckdb"
    scen = tmp_path / "tiny.toml"
    scen.write_text(TOML)
    live = tmp_path / "w.duckdb.live"
    (live / "table=factory_ts" / "day=2026-06-29").mkdir(parents=True)
    (live / "table=factory_ts" / "day=2026-06-29" / "part-0000.parquet").write_bytes(b"someone's export")
    refused(["run", scen, "--out", out, "--hours", "1"], "w.duckdb.live", "move it away")
    assert (
        live / "table=factory_ts" / "day=2026-06-29" / "part-0000.parquet"
    ).read_bytes() == b"someone's export"
    # The publisher itself never removes it either (publishing is given up instead).
    pub = LivePublisher(out)
    pub.on_commit({}, {"run_id": "r"})
    assert pub.error is not None and (live / "table=factory_ts").is_dir()
    shutil.rmtree(live)

    wal = tmp_path / "w.duckdb.wal"  # a write-ahead log without its file: not the run's to remove
    wal.write_bytes(b"someone's log")
    refused(["run", scen, "--out", out, "--hours", "1"], "w.duckdb.wal", "without its file")
    assert wal.read_bytes() == b"someone's log"
    wal.unlink()
    lock = tmp_path / "w.duckdb.lock"
    lock.write_text("my notes about the lock\n")
    refused(["run", scen, "--out", out, "--hours", "1"], "w.duckdb.lock", "not a run lock")
    assert lock.read_text() == "my notes about the lock\n"
    lock.write_text("12345\n")  # a killed run's lock: reused
    # A killed run's live view: a manifest naming w.duckdb, and its parts.
    pub = LivePublisher(out)
    pub.on_commit({}, {"run_id": "old", "scenario_name": "tiny"})
    manifest = json.loads((live / MANIFEST).read_text())
    assert manifest["file"] == "w.duckdb"
    code, _, err = invoke("run", scen, "--out", out, "--hours", "1")
    assert code == 0, err
    assert not lock.exists() and not live.exists()  # reused, then removed by the run's close
    assert open_run_file(out).sql("SELECT count(*) FROM runs").fetchall() == [(1,)]


def test_export_overwrite_replaces_only_an_earlier_export(rec: tuple[Path, str], tmp_path: Path) -> None:
    p, _ = rec
    dest = tmp_path / "pq"
    code, _, err = invoke("export", p, dest, "--tables", "runs")
    assert code == 0, err
    refused(["export", p, dest, "--tables", "runs"], "not an empty directory", "--overwrite")
    code, _, err = invoke("export", p, dest, "--tables", "factory_ts", "--overwrite")
    assert code == 0, err
    assert sorted(x.name for x in dest.iterdir()) == ["table=factory_ts"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    refused(["export", p, mine, "--overwrite"], "thesis.tex", "not replaced")
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["mine", "pq", "week.duckdb", "week.duckdb.parts"]


def test_report_png_folder_is_an_output_too(rec: tuple[Path, str], tmp_path: Path) -> None:
    p, sha = rec
    refused(["report", p, "--out", tmp_path / "r.html", "--png", f"{p}.live"], "sidecar")
    mine = tmp_path / "pics"
    mine.mkdir()
    (mine / "holiday.jpg").write_bytes(b"\xff\xd8")
    refused(["report", p, "--out", tmp_path / "r.html", "--png", mine], "already exists")
    refused(["report", p, "--out", tmp_path / "r.html", "--png", mine, "--overwrite"], "holiday.jpg")
    assert (mine / "holiday.jpg").read_bytes() == b"\xff\xd8" and not (tmp_path / "r.html").exists()
    still_a_recording(p, sha)


def test_sweep_out_never_takes_someone_elses_folder(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(TOML)
    sweep = tmp_path / "sw.toml"
    sweep.write_text('[sweep]\nscenario = "tiny.toml"\nhours = 1\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "results.parquet").write_bytes(b"someone's results")
    refused(["sweep", sweep, "--out", theirs, "-j", "1"], "theirs", "not a sweep folder")
    assert (theirs / "results.parquet").read_bytes() == b"someone's results"
    assert sorted(x.name for x in theirs.iterdir()) == ["results.parquet"]
    # A stand-in for `--out /`: a folder holding other things.
    root = tmp_path / "root"
    for d in ("etc", "home", "usr"):
        (root / d).mkdir(parents=True)
    refused(["sweep", sweep, "--out", root, "-j", "1"], "holds")
    assert sorted(x.name for x in root.iterdir()) == ["etc", "home", "usr"]


def test_the_root_folder_is_never_an_output() -> None:
    """`--out /` is refused by the check itself, before anything could be written there."""
    with pytest.raises(OutputError, match="root folder"):
        check_output("/", kind="dir", resumable=lambda _: None)
    with pytest.raises(OutputError, match="root folder"):
        check_output("/", kind="dir", overwrite=True, replaceable=lambda _: None)
    with pytest.raises(OutputError, match="root folder"):
        check_output("/tmp/..", kind="dir", resumable=lambda _: None)


def test_an_output_pipe_or_broken_link_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="not a regular file"):
        check_output(fifo, overwrite=True)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputError, match="broken symbolic link"):
        check_output(tmp_path / "dangling", overwrite=True)
    with pytest.raises(OutputError, match="no such directory"):
        check_output(tmp_path / "no" / "such.csv")
    assert check_run_output(tmp_path / "new" / "run.duckdb") == tmp_path / "new" / "run.duckdb"


# ---------------------------------------------------------------- failures leave nothing behind
def test_atomic_writers_leave_nothing_on_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), atomic_file(tmp_path / "a.csv") as f:
        f.write(b"half")
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "d") as d:
        (d / "one.png").write_bytes(b"x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    # An existing folder is replaced whole, or kept whole.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "old.png").write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "d") as d:
        raise RuntimeError("boom")
    assert [x.name for x in (tmp_path / "d").iterdir()] == ["old.png"]
    with atomic_dir(tmp_path / "d") as d:
        (d / "new.png").write_bytes(b"new")
    assert [x.name for x in (tmp_path / "d").iterdir()] == ["new.png"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["d"]


def test_proc_is_refused_in_one_line(rec: tuple[Path, str]) -> None:
    p, _ = rec
    refused(
        ["sql", p, "SELECT 1", "--format", "csv", "--out", "/proc/twin-test.csv"], "/proc", "cannot write"
    )
    refused(["export", p, "/proc/twin-test"], "/proc", "cannot write")
    refused(["report", p, "--out", "/proc/twin-test.html"], "/proc", "cannot write")
    refused(["report", p, "--out", p.with_name("r.html"), "--png", "/proc/twin-pngs"], "/proc")
    assert not p.with_name("r.html").exists()


def test_a_read_only_folder_is_refused_in_one_line(rec: tuple[Path, str], tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder (the read-only mount test covers it)")
    p, _ = rec
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        refused(["sql", p, "SELECT 1", "--format", "csv", "--out", ro / "x.csv"], "cannot write", "ermission")
        refused(["export", p, ro / "pq"], "cannot write")
        refused(["report", p, "--out", ro / "r.html"], "cannot write")
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


@pytest.fixture
def mount(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A small tmpfs with the given options (root only), unmounted afterwards."""
    made: list[Path] = []

    def make(name: str, options: str) -> Path:
        m = tmp_path / name
        m.mkdir()
        if (
            os.geteuid() != 0
            or subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(m)], capture_output=True
            ).returncode
        ):
            pytest.skip("needs to mount a small tmpfs (root)")
        made.append(m)
        return m

    yield make
    for m in made:
        if subprocess.run(["umount", str(m)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(m)], capture_output=True, check=False)


def test_a_read_only_file_system_is_refused_in_one_line(rec: tuple[Path, str], mount) -> None:  # type: ignore[no-untyped-def]
    p, _ = rec
    ro = mount("ro", "ro,size=1m")
    refused(
        ["sql", p, "SELECT 1", "--format", "csv", "--out", ro / "x.csv"], "Read-only file system", code_=74
    )
    refused(["export", p, ro / "pq"], "Read-only file system", code_=74)
    refused(["report", p, "--out", ro / "r.html"], "Read-only file system", code_=74)
    refused(
        ["report", p, "--out", p.with_name("r.html"), "--png", ro / "png"], "Read-only file system", code_=74
    )
    assert list(ro.iterdir()) == [] and not p.with_name("r.html").exists()


def test_a_full_disk_leaves_no_plot_page_or_part_behind(rec: tuple[Path, str], mount) -> None:  # type: ignore[no-untyped-def]
    """Nine PNG plots do not fit in 160 kB: the report fails in one line and leaves neither a
    plot nor the page (a full disk used to leave one PNG of nine behind); the same for an export
    and a query result."""
    p, sha = rec
    full = mount("full", "size=160k")
    refused(
        ["report", p, "--out", full / "r.html", "--png", full / "png"], "No space left on device", code_=74
    )
    assert list(full.iterdir()) == []
    refused(["export", p, full / "pq"], "No space left on device", code_=74)
    assert list(full.iterdir()) == []
    refused(
        ["sql", p, "SELECT * FROM chip_ts, range(500)", "--format", "csv", "--out", full / "chips.csv"],
        "No space left",
        code_=74,
    )
    assert list(full.iterdir()) == []
    still_a_recording(p, sha)


def test_output_errors_are_storage_errors() -> None:
    """The command boundary classifies ``StorageError``; an output refusal is one."""
    assert issubclass(OutputError, StorageError)
    assert OutputError("x", 28).errno == 28
