"""Output files under hostile conditions, through the real command line: every output whole
or absent, refused before the search when it can be known then, modes that honour the umask,
symbolic links written through, colliding names refused, a full disk, kills at several points
of a search and the temporary files they leave."""

import os
import signal
import stat
import subprocess
import time

import pytest

from golden import assert_blastn_found_hits, needs_blast
from reliability import (World, assert_one_line_error, blastn, mount_tmpfs, search,
                         start_search, temporaries, unmount, wait_for)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return World(tmp_path_factory.mktemp("reliability_output"))


@pytest.fixture(scope="module")
def expected(world):
    """The search's output for world.query, written to standard output."""
    done = search(world, "-query", world.query)
    assert done.returncode == 0 and done.stdout.count("\n") >= 2, done.stderr
    return done.stdout


def copy_query(world, path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(open(world.query).read())
    return str(path)


def query_list(folder, *names) -> str:
    listing = folder / "list.txt"
    listing.write_text("".join(f"{name}\n" for name in names))
    return str(listing)


# -- names, folders and modes ---------------------------------------------------------------

@pytest.mark.parametrize("second", ["b/q.fa", "b/q.fasta", "a/q.fa"])
def test_colliding_out_dir_names_are_refused_before_searching(world, tmp_path, second):
    copy_query(world, tmp_path / "a" / "q.fa")
    copy_query(world, tmp_path / second)
    out_dir = tmp_path / "out"
    done = search(world, "-query_list", query_list(tmp_path, "a/q.fa", second),
                  "-out_dir", str(out_dir))
    error = assert_one_line_error(done, 2)
    assert str(tmp_path / "a" / "q.fa") in error and str(tmp_path / second) in error
    assert "q.out" in error
    assert not out_dir.exists()


def test_out_together_with_out_dir_is_an_options_error(world, tmp_path):
    copy_query(world, tmp_path / "q.fa")
    done = search(world, "-query_list", query_list(tmp_path, "q.fa"),
                  "-out", str(tmp_path / "x.tsv"), "-out_dir", str(tmp_path / "out"))
    assert "-out" in assert_one_line_error(done, 2)
    assert sorted(os.listdir(tmp_path)) == ["list.txt", "q.fa"]


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002, 0o077])
def test_files_and_folders_honour_the_umask(world, tmp_path, expected, umask):
    out = tmp_path / "out.tsv"
    done = search(world, "-query", world.query, "-out", str(out), umask=umask)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    assert out.read_text() == expected
    copy_query(world, tmp_path / "q.fa")
    out_dir = tmp_path / "made" / "here"
    done = search(world, "-query_list", query_list(tmp_path, "q.fa"), "-out_dir", str(out_dir),
                  umask=umask)
    assert done.returncode == 0, done.stderr
    for folder in (tmp_path / "made", out_dir):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((out_dir / "q.out").stat().st_mode) == 0o666 & ~umask


@needs_blast
@pytest.mark.golden
def test_output_mode_is_blastns(world, tmp_path):
    for umask in (0o022, 0o037):
        theirs, ours = tmp_path / f"blastn{umask}.tsv", tmp_path / f"gblastn{umask}.tsv"
        subprocess.run(["blastn", "-db", world.db, "-query", world.query, "-outfmt", "6",
                        "-out", str(theirs)], check=True, umask=umask)
        assert search(world, "-query", world.query, "-out", str(ours), umask=umask).returncode == 0
        assert stat.S_IMODE(ours.stat().st_mode) == stat.S_IMODE(theirs.stat().st_mode)


def test_a_replaced_file_keeps_its_mode(world, tmp_path, expected):
    out = tmp_path / "out.tsv"
    out.write_text("old results\n")
    out.chmod(0o600)
    done = search(world, "-query", world.query, "-out", str(out), umask=0o022)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert out.read_text() == expected


def test_out_through_a_symbolic_link_replaces_its_target(world, tmp_path, expected):
    target, link = tmp_path / "target.tsv", tmp_path / "link.tsv"
    target.write_text("old\n")
    link.symlink_to("target.tsv")
    assert search(world, "-query", world.query, "-out", str(link)).returncode == 0
    assert link.is_symlink() and os.readlink(link) == "target.tsv"
    assert target.read_text() == expected
    dangling = tmp_path / "dangling.tsv"
    dangling.symlink_to("created.tsv")
    assert search(world, "-query", world.query, "-out", str(dangling)).returncode == 0
    assert dangling.is_symlink() and (tmp_path / "created.tsv").read_text() == expected
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linked").symlink_to("real")
    out = tmp_path / "linked" / "out.tsv"
    assert search(world, "-query", world.query, "-out", str(out)).returncode == 0
    assert (real / "out.tsv").read_text() == expected
    assert temporaries(tmp_path) == [] and temporaries(real) == []


def test_devices_and_descriptors_are_written_directly(world, expected):
    done = search(world, "-query", world.query, "-out", os.devnull)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    done = search(world, "-query", world.query, "-out", "/dev/stdout")  # a pipe here
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


# -- refused before the search --------------------------------------------------------------
# The query comes from a pipe that is never written to or closed: a run that got as far as
# reading queries would wait there until the test's timeout.

def refused_before_reading_queries(world, *args) -> subprocess.CompletedProcess:
    process = start_search(world, "-query", "-", *args)
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout.decode(),
                                       stderr.decode())


def test_out_naming_a_directory_fails_before_the_search(world, tmp_path):
    error = assert_one_line_error(refused_before_reading_queries(world, "-out", str(tmp_path)), 4)
    assert str(tmp_path) in error and "directory" in error
    assert os.listdir(tmp_path) == []


def test_out_in_a_missing_folder_fails_before_the_search(world, tmp_path):
    out = tmp_path / "missing" / "out.tsv"
    error = assert_one_line_error(refused_before_reading_queries(world, "-out", str(out)), 4)
    assert str(out) in error
    assert os.listdir(tmp_path) == []


def test_out_dir_that_is_a_file_fails_before_the_search(world, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = refused_before_reading_queries(world, "-out_dir", str(blocker))
    assert str(blocker) in assert_one_line_error(done, 4)
    assert blocker.read_text() == ""


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder this process cannot write to: a read-only tmpfs where it may mount one
    (root ignores permission bits), else one with its write bits off."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    if os.geteuid() == 0:
        if not mount_tmpfs(folder, "64k", read_only=True):
            pytest.skip("root without the right to mount a tmpfs: no unwritable folder")
        yield folder
        unmount(folder)
    else:
        folder.chmod(0o500)
        yield folder
        folder.chmod(0o700)


def test_unwritable_folders_fail_before_the_search(world, read_only_folder):
    out = read_only_folder / "out.tsv"
    assert str(out) in assert_one_line_error(
        refused_before_reading_queries(world, "-out", str(out)), 4)
    out_dir = read_only_folder / "out"
    assert str(out_dir) in assert_one_line_error(
        refused_before_reading_queries(world, "-out_dir", str(out_dir)), 4)
    assert os.listdir(read_only_folder) == []


@pytest.mark.parametrize("listed", ["folder", "missing.fa"])
def test_a_bad_listed_file_is_reported_before_any_output(world, tmp_path, listed):
    copy_query(world, tmp_path / "good.fa")
    (tmp_path / "folder").mkdir()
    out_dir = tmp_path / "out"
    done = search(world, "-query_list", query_list(tmp_path, "good.fa", listed),
                  "-out_dir", str(out_dir))
    assert str(tmp_path / listed) in assert_one_line_error(done, 2)
    assert not out_dir.exists()


def test_a_failed_out_dir_run_leaves_none_of_its_outputs(world, tmp_path):
    copy_query(world, tmp_path / "good.fa")
    (tmp_path / "bad.fa").write_text(">bad\n123456\n")  # refused as blastn refuses it
    listing = query_list(tmp_path, "good.fa", "bad.fa")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "other.txt").write_text("not ours\n")
    assert_one_line_error(search(world, "-query_list", listing, "-out_dir", str(kept)), 2)
    assert os.listdir(kept) == ["other.txt"]
    made = tmp_path / "made" / "deeper"
    assert_one_line_error(search(world, "-query_list", listing, "-out_dir", str(made)), 2)
    assert not (tmp_path / "made").exists()


# -- a full disk ----------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    folder = tmp_path / "small"
    folder.mkdir()
    if not mount_tmpfs(folder, "8k"):
        pytest.skip("cannot mount a tmpfs here (not root?)")
    yield folder
    unmount(folder)


def test_a_full_disk_is_a_one_line_output_error(world, tmp_path, small_disk):
    # about 2,000 queries of a few hits each: far more than the 8 kB of the disk
    records = "".join(f">q{i}\n{world.sequences['short']}\n" for i in range(2000))
    (tmp_path / "many.fa").write_text(records)
    done = search(world, "-query", str(tmp_path / "many.fa"), "-outfmt", "7",
                  "-out", str(small_disk / "out.tsv"))
    assert "No space left on device" in assert_one_line_error(done, 4)
    assert os.listdir(small_disk) == []
    copy_query(world, tmp_path / "small.fa")
    done = search(world, "-query_list", query_list(tmp_path, "small.fa", "many.fa"),
                  "-outfmt", "7", "-out_dir", str(small_disk / "out"))
    assert "No space left on device" in assert_one_line_error(done, 4)
    assert os.listdir(small_disk) == []


# -- kills ----------------------------------------------------------------------------------

def started_and_stopped_at(world, tmp_path, point: str):
    """A search started and brought to `point` of its run; returns (process, output folder,
    the outputs it would write)."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    if point == "start-up":
        process = start_search(world, "-query", world.query, "-out", str(out_dir / "out.tsv"))
        time.sleep(0.1)  # inside the interpreter's start or the imports (a whole search of
        #                  this query takes 0.3 s)
        return process, out_dir, [out_dir / "out.tsv"]
    if point == "reading queries":
        process = start_search(world, "-out", str(out_dir / "out.tsv"))  # the query: stdin
        process.stdin.write(open(world.query, "rb").read())
        process.stdin.flush()
        wait_for(lambda: temporaries(out_dir), what="the output's temporary file")
        time.sleep(0.5)  # the first queries read, maybe searched
        return process, out_dir, [out_dir / "out.tsv"]
    # between two outputs of -out_dir: the second listed file is a pipe that no one writes
    copy_query(world, tmp_path / "first.fa")
    os.mkfifo(tmp_path / "second.fa")
    process = start_search(world, "-query_list", query_list(tmp_path, "first.fa", "second.fa"),
                           "-out_dir", str(out_dir))
    wait_for(lambda: _has_reader(tmp_path / "second.fa"), what="the second file's turn")
    return process, out_dir, [out_dir / "first.out", out_dir / "second.out"]


def _has_reader(fifo) -> bool:
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        return False
    return True


POINTS = ["start-up", "reading queries", "between outputs"]


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_leaves_no_output_and_the_next_run_removes_its_temporaries(world, tmp_path,
                                                                           point, expected):
    process, out_dir, outputs = started_and_stopped_at(world, tmp_path, point)
    process.kill()
    process.communicate()
    assert_none_or_whole(outputs, expected, point)
    if point != "start-up":
        assert temporaries(out_dir), "the kill was meant to leave a temporary file"
    later = out_dir / "later.tsv"
    done = search(world, "-query", world.query, "-out", str(later))
    assert done.returncode == 0, done.stderr
    assert later.read_text() == expected
    assert temporaries(out_dir) == []


@pytest.mark.parametrize("point", POINTS)
def test_sigterm_removes_the_run_s_temporaries_at_once(world, tmp_path, point, expected):
    process, out_dir, outputs = started_and_stopped_at(world, tmp_path, point)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    # at start-up the signal may come before gblastn's handler is set: then it ends the
    # interpreter at once, before any output was begun
    assert process.returncode in ((130, -signal.SIGTERM) if point == "start-up" else (130,)), \
        stderr
    assert "Traceback" not in stderr.decode()
    assert_none_or_whole(outputs, expected, point)
    assert temporaries(out_dir) == []


def assert_none_or_whole(outputs, expected: str, point: str) -> None:
    """No output of a killed run, except at start-up, whose kill comes after a fixed time: a
    fast machine may have finished by then, and its output must then be whole."""
    if point == "start-up" and outputs[0].exists():
        assert outputs[0].read_text() == expected
        return
    assert not any(path.exists() for path in outputs)


def test_stale_temporaries_are_removed_and_live_ones_kept(world, tmp_path, expected):
    from gblastn.output.files import temporary_name

    gone = subprocess.Popen(["true"])
    gone.wait()
    day_ago = time.time() - 2 * 24 * 3600
    files = {
        "dead": temporary_name(gone.pid),
        "alive": temporary_name(os.getpid()),
        "old_other_host": ".gblastn-12-0123abcd-feedbeef.tmp",
        "new_other_host": ".gblastn-13-0123abcd-feedbeef.tmp",
        "old_unnamed": ".gblastn-k2j4_x8q.tmp",
        "unrelated": "notes.tmp",
    }
    for name in files.values():
        (tmp_path / name).write_text("partial\n")
    for key in ("old_other_host", "old_unnamed"):
        os.utime(tmp_path / files[key], (day_ago, day_ago))
    done = search(world, "-query", world.query, "-out", str(tmp_path / "out.tsv"))
    assert done.returncode == 0, done.stderr
    left = set(os.listdir(tmp_path))
    assert {files["alive"], files["new_other_host"], files["unrelated"]} <= left
    assert not {files["dead"], files["old_other_host"], files["old_unnamed"]} & left
    assert (tmp_path / "out.tsv").read_text() == expected


@needs_blast
@pytest.mark.golden
def test_output_through_a_link_is_blastns(world, tmp_path):
    """blastn writes through a symbolic link; so does gblastn, with the same result."""
    for tool in ("blastn", "gblastn"):
        (tmp_path / f"{tool}.target").write_text("")
        (tmp_path / f"{tool}.link").symlink_to(f"{tool}.target")
    blastn(world, "-query", world.query, "-outfmt", "6", "-out", str(tmp_path / "blastn.link"))
    search(world, "-query", world.query, "-outfmt", "6", "-out", str(tmp_path / "gblastn.link"))
    for tool in ("blastn", "gblastn"):
        assert (tmp_path / f"{tool}.link").is_symlink()
    assert_blastn_found_hits((tmp_path / "blastn.target").read_text())
    assert (tmp_path / "gblastn.target").read_text() == (tmp_path / "blastn.target").read_text()
