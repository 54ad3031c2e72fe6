"""makedb and the database reader when things go wrong: builds killed at every stage, damaged
files, format versions this reader does not know, long ids, missing folders, read-only
databases. The name always holds one complete database; damage is a DatabaseError naming
the database, never different answers."""

import fcntl
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import lmdb
import numpy as np
import pytest

from gblastn.alphabet import IUPAC_FROM_BLASTNA, pack_2bit, encode_blastna
from gblastn.db import format as fmt
from gblastn.db import reader
from gblastn.db.reader import open_db
from gblastn.db.writer import make_db
from gblastn.errors import DatabaseError, InputError

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def gblastn(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "gblastn", *map(str, args)],
                          capture_output=True, env=ENV, **kwargs)


def assert_clean_failure(done, pattern, code):
    err = done.stderr.decode()
    assert done.returncode == code, err
    assert err.count("\n") == 1 and err.startswith("gblastn: error: ") and pattern in err, err


def random_records(seed: int, count: int, length: int, prefix: str):
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"ACGTN", np.uint8)
    return [(f"{prefix}{i} title {seed}", letters[rng.integers(0, 5, length)].tobytes().decode())
            for i in range(count)]


def write_fasta(path: Path, records) -> Path:
    with open(path, "w") as handle:
        for defline, letters in records:
            handle.write(f">{defline}\n")
            handle.writelines(letters[at:at + 70] + "\n" for at in range(0, len(letters), 70))
    return path


def contents(db) -> list:
    """(defline, letters) of every sequence, as the reader gives them."""
    with open_db(str(db)) as database:
        return [(database.defline(i), IUPAC_FROM_BLASTNA[database.blastna(i)].tobytes().decode())
                for i in range(database.num_seqs)]


def generations(db: Path) -> list:
    return sorted(p.name for p in db.with_suffix(".gdb").glob(fmt.GENERATION_PREFIX + "*"))


OLD = random_records(1, 3, 500, "old")
NEW = random_records(2, 4, 700, "new")
LATER = random_records(3, 2, 300, "later")

# A build that SIGKILLs itself at one point of its way (argv: point, FASTA, database name).
KILLED_BUILD = textwrap.dedent("""
    import os, shutil, signal, sys
    from gblastn.db import generations, writer

    point, fasta, out = sys.argv[1:4]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "writing":      # a block stored and committed, the volume unfinished
        store = writer._VolumeWriter._store_block
        def store_then_die(self, data):
            store(self, data)
            self.txn.commit()
            die()
        writer._VolumeWriter._store_block = store_then_die
    elif point == "staged":     # the finished manifest written into the generation
        generations.os.replace = lambda source, target: die()
    elif point == "installed":  # the manifest renamed into place, nothing removed yet
        rename = os.replace
        def rename_then_die(source, target):
            rename(source, target)
            die()
        generations.os.replace = rename_then_die
    elif point == "removing":   # the replaced generation half removed
        def remove_part_then_die(path, *args, **kwargs):
            os.unlink(os.path.join(path, sorted(os.listdir(path))[0]))
            die()
        generations.shutil.rmtree = remove_part_then_die
    writer.fmt.BLOCK_BYTES = 64  # a block a sequence: one is stored before the end
    writer.make_db([fasta], out, progress=False)
""")


def killed_build(point: str, fasta: Path, db: Path) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED_BUILD, point, str(fasta), str(db)],
                          env=ENV, capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


@pytest.mark.parametrize("point,survivor", [("writing", OLD), ("staged", OLD),
                                            ("installed", NEW), ("removing", NEW)])
def test_killed_replacement_leaves_the_old_or_the_new_database_whole(tmp_path, point, survivor):
    db = tmp_path / "db"
    make_db([str(write_fasta(tmp_path / "old.fa", OLD))], str(db), progress=False)
    killed_build(point, write_fasta(tmp_path / "new.fa", NEW), db)
    assert contents(db) == survivor
    assert len(generations(db)) == 2  # the dead build's, or the one it replaced
    # a following build that fails keeps the only complete copy ...
    (tmp_path / "bad.fa").write_text(">x\nAC%GT\n")
    assert_clean_failure(gblastn("makedb", "-in", tmp_path / "bad.fa", "-out", db, "-strict"),
                         "invalid character '%'", 2)
    assert contents(db) == survivor
    # ... and a following build that succeeds replaces it and removes what the dead one left
    make_db([str(write_fasta(tmp_path / "later.fa", LATER))], str(db), progress=False)
    assert contents(db) == LATER
    assert len(generations(db)) == 1


def test_killed_first_build_leaves_no_database_and_the_next_one_cleans_up(tmp_path):
    db = tmp_path / "db"
    killed_build("writing", write_fasta(tmp_path / "new.fa", NEW), db)
    assert_clean_failure(gblastn("dbinfo", "-db", db), "no gblastn database found", 3)
    make_db([str(write_fasta(tmp_path / "old.fa", OLD))], str(db), progress=False)
    assert contents(db) == OLD and len(generations(db)) == 1


def test_kills_at_any_moment_of_a_real_build(tmp_path):
    """SIGKILL at growing delays into `gblastn makedb` on a larger input: each time the name
    holds the database it held before or the one being built, whole."""
    db = tmp_path / "db"
    inputs = [write_fasta(tmp_path / f"big{i}.fa", random_records(10 + i, 12, 1_500_000, f"b{i}_"))
              for i in range(2)]
    make_db([str(inputs[1])], str(db), progress=False)
    expected = [contents(db)]
    make_db([str(inputs[0])], str(db), progress=False)
    expected.insert(0, contents(db))
    current = 0
    for delay in (0.05, 0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 3.0):
        target = 1 - current
        build = subprocess.Popen([sys.executable, "-m", "gblastn", "makedb", "-in",
                                  str(inputs[target]), "-out", str(db), "-quiet"], env=ENV)
        time.sleep(delay)
        build.send_signal(signal.SIGKILL)
        build.wait()
        found = contents(db)
        assert found in expected
        current = expected.index(found)
    make_db([str(inputs[0])], str(db), progress=False)
    assert contents(db) == expected[0] and len(generations(db)) == 1


def test_concurrent_builds_of_one_name_leave_one_complete_database(tmp_path):
    db = tmp_path / "db"
    sources = {"old": OLD, "new": NEW, "later": LATER}
    builds = [subprocess.Popen([sys.executable, "-m", "gblastn", "makedb", "-in",
                                str(write_fasta(tmp_path / f"{name}.fa", records)), "-out", str(db),
                                "-quiet"], env=ENV)
              for name, records in sources.items()]
    assert [build.wait() for build in builds] == [0, 0, 0]
    assert contents(db) in sources.values()
    assert len(generations(db)) == 1


def test_a_running_builds_generation_is_left_alone(tmp_path):
    db = tmp_path / "db"
    make_db([str(write_fasta(tmp_path / "old.fa", OLD))], str(db), progress=False)
    running = db.with_suffix(".gdb") / (fmt.GENERATION_PREFIX + "0123456789abcdef")
    running.mkdir()
    (running / "v000.mdb").write_bytes(b"being written")
    held = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # as the build that made it holds it while it runs
    try:
        assert gblastn("makedb", "-in", tmp_path / "old.fa", "-out", db).returncode == 0
        assert running.exists()
    finally:
        os.close(held)  # the build ended (a killed one's lock goes with its process)
    assert gblastn("makedb", "-in", tmp_path / "old.fa", "-out", db).returncode == 0
    assert not running.exists() and len(generations(db)) == 1


def test_a_database_replaced_while_it_is_opened_is_opened_as_the_new_one(tmp_path, monkeypatch):
    db = tmp_path / "db"
    make_db([str(write_fasta(tmp_path / "old.fa", OLD))], str(db), progress=False)
    read_manifest = reader._read_manifest
    replaced = []

    def read_then_replace(directory, name):
        manifest = read_manifest(directory, name)
        if not replaced:  # the old volumes go between reading the manifest and opening them
            replaced.append(make_db([str(write_fasta(tmp_path / "new.fa", NEW))], str(db),
                                    progress=False))
        return manifest

    monkeypatch.setattr(reader, "_read_manifest", read_then_replace)
    assert contents(db) == NEW and replaced


def test_an_open_database_keeps_reading_after_it_is_replaced(tmp_path):
    db = tmp_path / "db"
    make_db([str(write_fasta(tmp_path / "old.fa", OLD))], str(db), progress=False)
    with open_db(str(db)) as database:
        make_db([str(write_fasta(tmp_path / "new.fa", NEW))], str(db), progress=False)
        assert database.defline(2) == OLD[2][0]
        assert IUPAC_FROM_BLASTNA[database.blastna(2)].tobytes().decode() == OLD[2][1]
    assert contents(db) == NEW


# -- damage ------------------------------------------------------------------------------------

def volume_file(db: Path) -> Path:
    (path,) = db.with_suffix(".gdb").glob(fmt.GENERATION_PREFIX + "*/v000.mdb")
    return path


def flip_byte(path: Path, needle: bytes, offset: int = 0) -> None:
    """Flips a bit of the byte at `offset` in each copy of `needle` in the file (LMDB may
    keep an earlier copy of a page beside the one in use)."""
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0
    while at >= 0:
        data[at + offset] ^= 0x01
        at = data.find(needle, at + 1)
    path.write_bytes(bytes(data))


def rewrite_volume(db: Path, change) -> None:
    """`change(txn)` made to the volume through LMDB, and the manifest's file checks made to
    match: damage that only the checks on what is read can find."""
    path = volume_file(db)
    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=0)
    with env.begin(write=True) as txn:
        change(txn)
    env.close()
    manifest_path = db.with_suffix(".gdb") / fmt.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["volumes"][0]["file_size"] = path.stat().st_size
    manifest["volumes"][0]["structure_crc"] = fmt.structure_crc(str(path))
    manifest_path.write_text(fmt.manifest_text(manifest))


SMALL = [(defline, random_records(seed, 1, length, "")[0][1].replace("N", "G"))  # bases only
         for defline, seed, length in [("gi|7|gb|AB000007.1| subject seven", 7, 300),
                                       ("ref|NM_000002.3| subject two", 8, 360)]]


@pytest.fixture
def small_db(tmp_path):
    db = tmp_path / "db"
    make_db([str(write_fasta(tmp_path / "in.fa", SMALL))], str(db), parse_seqids=True,
            title="Small test DB", progress=False)
    return db


def test_a_flipped_defline_byte_is_a_database_error(small_db):
    flip_byte(volume_file(small_db), b"subject seven", 3)
    assert_clean_failure(gblastn("dbcmd", "-db", small_db, "-entry", "all"), "damaged", 3)


def test_a_defline_changed_behind_the_file_checks_is_a_database_error(small_db):
    rewrite_volume(small_db, lambda txn: txn.put(fmt.defline_key(0),
                                                 SMALL[0][0].replace("seven", "eight").encode()))
    assert_clean_failure(gblastn("dbcmd", "-db", small_db, "-entry", "all"),
                         "defline 0 checksum mismatch", 3)


def test_a_flipped_defline_byte_fails_a_search_cleanly(small_db, tmp_path):
    """A damaged defline once gave its hits under another subject's name, exit 0."""
    write_fasta(tmp_path / "q.fa", [("query", SMALL[0][1][20:280])])
    flip_byte(volume_file(small_db), b"AB000007.1| subject seven", 3)
    done = gblastn("search", "-db", small_db, "-query", tmp_path / "q.fa", "-device", "cpu",
                   "-out", tmp_path / "hits.tsv")
    assert_clean_failure(done, "damaged", 3)
    assert not (tmp_path / "hits.tsv").exists()


def test_a_flipped_sequence_byte_is_a_database_error(small_db):
    packed = pack_2bit(encode_blastna(SMALL[1][1])).tobytes()
    flip_byte(volume_file(small_db), packed[:40], 17)
    assert_clean_failure(gblastn("dbcmd", "-db", small_db, "-entry", "NM_000002"),
                         "checksum mismatch", 3)


def test_a_flipped_id_key_byte_is_a_database_error_not_a_missing_id(small_db):
    flip_byte(volume_file(small_db), fmt.id_key_prefix("ab000007"), 5)
    assert_clean_failure(gblastn("dbcmd", "-db", small_db, "-entry", "AB000007"), "damaged", 3)


def test_an_id_key_lost_behind_the_file_checks_is_a_database_error(small_db):
    rewrite_volume(small_db, lambda txn: txn.delete(fmt.id_key_prefix("AB000007")
                                                    + (0).to_bytes(8, "big")))
    assert_clean_failure(gblastn("dbcmd", "-db", small_db, "-entry", "AB000007"),
                         "id keys checksum mismatch", 3)


def test_an_id_key_naming_another_sequence_is_a_database_error(small_db):
    """A key that names the wrong sequence is passed over (the sequence's defline does not
    carry the id, as after a hash collision), and the keys' checksum then finds the damage."""
    prefix = fmt.id_key_prefix("AB000007")

    def point_the_key_elsewhere(txn):
        txn.delete(prefix + (0).to_bytes(8, "big"))
        txn.put(prefix + (1).to_bytes(8, "big"), b"")

    rewrite_volume(small_db, point_the_key_elsewhere)
    with open_db(str(small_db)) as database:
        assert database.find("NM_000002") == 1
        with pytest.raises(DatabaseError, match="id keys checksum mismatch"):
            database.find("AB000007")


def test_a_flipped_title_byte_in_the_manifest_is_a_database_error(small_db):
    flip_byte(small_db.with_suffix(".gdb") / fmt.MANIFEST, b"Small test DB", 2)
    assert_clean_failure(gblastn("dbinfo", "-db", small_db), "manifest checksum mismatch", 3)


@pytest.mark.parametrize("needle,offset", [(b'"num_seqs": 2', 12), (b'"max_length": 360', 14),
                                           (b'"format": "gblastn', 2)])
def test_a_flipped_manifest_byte_is_a_database_error(small_db, needle, offset):
    flip_byte(small_db.with_suffix(".gdb") / fmt.MANIFEST, needle, offset)
    with pytest.raises(DatabaseError):
        open_db(str(small_db))


def test_every_flipped_byte_of_a_volume_is_an_error_or_changes_nothing(small_db):
    """Each byte of the volume file in turn (every fifth one), flipped: reading every
    defline, id and sequence gives the same answers or a DatabaseError; never other answers,
    never a crash (LMDB follows damaged pages wherever they point)."""
    scan = textwrap.dedent("""
        import os, sys
        from gblastn.db.reader import open_db
        from gblastn.errors import DatabaseError

        db, volume = sys.argv[1:3]

        def answers():
            with open_db(db) as database:
                out = [database.find("AB000007"), database.find("nm_000002")]
                for i in range(database.num_seqs):
                    out += [database.defline(i), database.seq_id(i), database.title_of(i),
                            database.blastna(i).tobytes()]
                return repr(out) + database.title

        good = answers()
        original = open(volume, "rb").read()
        outcomes = {}
        for at in range(0, len(original), 5):
            damaged = bytearray(original)
            damaged[at] ^= 0xFF
            with open(volume, "wb") as handle:
                handle.write(damaged)
            child = os.fork()
            if child == 0:
                try:
                    code = 0 if answers() == good else 1
                except DatabaseError:
                    code = 2
                os._exit(code)
            _, status = os.waitpid(child, 0)
            outcome = {0: "same", 1: "different", 2: "error"}.get(
                os.waitstatus_to_exitcode(status), "crash")
            outcomes.setdefault(outcome, []).append(at)
        print({k: len(v) if k in ("same", "error") else v for k, v in outcomes.items()})
    """)
    done = subprocess.run([sys.executable, "-c", scan, str(small_db), str(volume_file(small_db))],
                          capture_output=True, env=ENV, text=True)
    assert done.returncode == 0, done.stderr
    outcomes = eval(done.stdout)  # noqa: S307 - the scan's own report
    assert set(outcomes) <= {"same", "error"}, outcomes
    assert outcomes["error"] > 10 * outcomes.get("same", 0)


@pytest.mark.parametrize("version", [0, -1, fmt.FORMAT_VERSION + 1, 99, "2", 2.0, True, None,
                                     "missing"])
def test_a_format_version_this_reader_does_not_know_is_refused(small_db, version):
    path = small_db.with_suffix(".gdb") / fmt.MANIFEST
    manifest = json.loads(path.read_text())
    if version == "missing":
        del manifest["format_version"]
    else:
        manifest["format_version"] = version
    path.write_text(fmt.manifest_text(manifest))  # a well-formed manifest, checksum and all
    with pytest.raises(DatabaseError, match="cannot read this database"):
        open_db(str(small_db))
    done = gblastn("dbinfo", "-db", small_db)
    expected = "newer gblastn" if version in (fmt.FORMAT_VERSION + 1, 99) else "format version"
    assert_clean_failure(done, expected, 3)


@pytest.mark.parametrize("text", ["", "{", "[]", '{"format": "gblastn-nucl-db"', "\xff\xfe"])
def test_a_garbled_manifest_is_refused(small_db, text):
    (small_db.with_suffix(".gdb") / fmt.MANIFEST).write_bytes(text.encode("latin-1"))
    assert_clean_failure(gblastn("dbinfo", "-db", small_db), "damaged database", 3)


# -- format version 1 ----------------------------------------------------------------------------

def write_version_1(db: Path, records) -> None:
    """A database as format version 1 wrote it (bases only): volume files beside the manifest,
    ids under 'key' + id with their ordinals as values, no defline checksums."""
    folder = db.with_suffix(".gdb")
    folder.mkdir()
    packed = [pack_2bit(encode_blastna(letters)).tobytes() for _, letters in records]
    lengths = np.array([len(letters) for _, letters in records], dtype=np.int64)
    offsets = np.cumsum([0] + [len(p) for p in packed[:-1]]).astype(np.int64)
    block = b"".join(packed)
    arrays = {b"lengths": lengths, b"block_of": np.zeros(len(records), np.int32),
              b"block_offset": offsets, b"block_crc": np.array([zlib.crc32(block)], np.uint32),
              b"amb_start": np.zeros(len(records) + 1, np.int64),
              b"amb_offset": np.zeros(0, np.int64), b"amb_length": np.zeros(0, np.int64),
              b"amb_code": np.zeros(0, np.uint8)}
    values = {key: array.tobytes() for key, array in arrays.items()}
    env = lmdb.open(str(folder / "v000.mdb"), subdir=False, lock=False, max_dbs=0)
    with env.begin(write=True) as txn:
        txn.put(fmt.block_key(0), block)
        for key, value in values.items():
            txn.put(key, value)
        for ordinal, (defline, _) in enumerate(records):
            txn.put(fmt.defline_key(ordinal), defline.encode())
            txn.put(fmt.lookup_key_v1(defline.split()[0]), np.array([ordinal], np.int64).tobytes())
    env.close()
    volume = {"file": "v000.mdb", "first_ordinal": 0, "num_seqs": len(records),
              "total_letters": int(lengths.sum()),
              "file_size": (folder / "v000.mdb").stat().st_size,
              "arrays_crc": fmt.arrays_crc(values)}
    manifest = {"format": fmt.FORMAT_NAME, "format_version": 1, "title": "v1",
                "created": "Jan 01, 2026  01:00 AM", "num_seqs": len(records),
                "total_letters": int(lengths.sum()), "max_length": int(lengths.max()),
                "parse_seqids": False, "volumes": [volume]}
    (folder / fmt.MANIFEST).write_text(json.dumps(manifest))


def test_a_version_1_database_is_read_and_then_replaced(tmp_path):
    db = tmp_path / "db"
    bases = [(d, letters.replace("N", "A")) for d, letters in OLD]
    write_version_1(db, bases)
    assert contents(db) == bases
    with open_db(str(db)) as database:
        assert database.format_version == 1 and database.find("OLD2") == 2
        with pytest.raises(InputError):
            database.find("old9")
    listed = gblastn("dbcmd", "-db", db, "-entry", "old1").stdout.decode()
    assert listed.startswith(">old1 title 1\n")
    make_db([str(write_fasta(tmp_path / "new.fa", NEW))], str(db), progress=False)
    assert contents(db) == NEW
    assert sorted(p.name for p in db.with_suffix(".gdb").iterdir()) == \
        sorted([fmt.MANIFEST] + generations(db))  # the version 1 volume is gone


# -- inputs and places -------------------------------------------------------------------------

LONG_IDS = ["Q" * 600, "x" * 5000 + "|end", "lcl|" + "Z" * 700]


@pytest.mark.parametrize("parse_seqids", [False, True])
def test_ids_longer_than_an_lmdb_key_are_stored_and_found(tmp_path, parse_seqids):
    records = [(f"{ident} long id {i}", "ACGT" * (50 + i)) for i, ident in enumerate(LONG_IDS)]
    records.append(("short one", "GGCC" * 40))
    fasta = write_fasta(tmp_path / "in.fa", records)
    flags = ["-parse_seqids"] if parse_seqids else []
    done = gblastn("makedb", "-in", fasta, "-out", tmp_path / "db", *flags)
    assert done.returncode == 0, done.stderr
    for i, ident in enumerate(LONG_IDS):
        lookup = ident[4:] if parse_seqids and ident.startswith("lcl|") else ident
        out = gblastn("dbcmd", "-db", tmp_path / "db", "-entry", lookup.lower()).stdout.decode()
        header = out.splitlines()[0]
        assert header.startswith(">" + lookup) and header.endswith(f"long id {i}")
    with open_db(str(tmp_path / "db")) as database:
        assert database.seq_id(0) == LONG_IDS[0] and database.find("short") == 3


@pytest.mark.skipif(shutil.which("blastn") is None or shutil.which("makeblastdb") is None,
                    reason="NCBI BLAST+ not installed")
def test_a_subject_with_a_long_id_is_reported_as_blastn_reports_it(tmp_path):
    subject = random_records(9, 1, 2000, "")[0][1].replace("N", "C")
    fasta = write_fasta(tmp_path / "in.fa", [(LONG_IDS[0] + " long one", subject),
                                             ("short two", "ACGT" * 100)])
    query = write_fasta(tmp_path / "q.fa", [("query", subject[500:1500])])
    subprocess.run(["makeblastdb", "-in", str(fasta), "-dbtype", "nucl", "-out",
                    str(tmp_path / "blast")], check=True, capture_output=True)
    expected = subprocess.run(["blastn", "-db", str(tmp_path / "blast"), "-query", str(query),
                               "-outfmt", "6 qseqid sseqid stitle length"], check=True,
                              capture_output=True).stdout
    assert gblastn("makedb", "-in", fasta, "-out", tmp_path / "db").returncode == 0
    done = gblastn("search", "-db", tmp_path / "db", "-query", query, "-device", "cpu",
                   "-outfmt", "6 qseqid sseqid stitle length")
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected and LONG_IDS[0].encode() in expected


def test_makedb_makes_missing_folders_as_the_umask_says(tmp_path):
    fasta = write_fasta(tmp_path / "in.fa", OLD)
    target = tmp_path / "a" / "b" / "c" / "db"
    done = subprocess.run([sys.executable, "-m", "gblastn", "makedb", "-in", str(fasta), "-out",
                           str(target), "-quiet"], env=ENV, capture_output=True,
                          preexec_fn=lambda: os.umask(0o027))
    assert done.returncode == 0, done.stderr
    assert contents(target) == OLD
    folders = [tmp_path / "a", tmp_path / "a" / "b", target.parent, target.with_suffix(".gdb")]
    folders += target.with_suffix(".gdb").glob(fmt.GENERATION_PREFIX + "*")
    for folder in folders:
        assert folder.stat().st_mode & 0o777 == 0o750, folder
    for file in [volume_file(target), target.with_suffix(".gdb") / fmt.MANIFEST]:
        assert file.stat().st_mode & 0o777 == 0o640, file


def read_only_runner(folder: Path):
    """How to run a command that sees `folder` read-only: a read-only bind mount in a user
    namespace (which binds even root), or file modes for an unprivileged user; None when
    neither is available."""
    if shutil.which("unshare"):
        mount = f"mount --bind -o ro '{folder}' '{folder}'"
        probe = subprocess.run(["unshare", "-rm", "sh", "-c",
                                f"{mount} && ! touch '{folder}/probe'"], capture_output=True)
        if probe.returncode == 0:
            return lambda args: subprocess.run(
                ["unshare", "-rm", "sh", "-c", mount + ' && exec "$@"', "sh", sys.executable,
                 "-m", "gblastn", *map(str, args)],
                capture_output=True, env=ENV)
    if os.geteuid() != 0:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        return gblastn
    return None


def test_a_read_only_database_is_searched_and_left_as_it_was(tmp_path):
    subject = random_records(5, 1, 3000, "subject")[0][1].replace("N", "A")
    fasta = write_fasta(tmp_path / "in.fa", [("subj one", subject), ("other two", "ACGT" * 100)])
    write_fasta(tmp_path / "q.fa", [("query", subject[1000:1600])])
    folder = tmp_path / "ro"
    folder.mkdir()
    make_db([str(fasta)], str(folder / "db"), progress=False)
    query = tmp_path / "q.fa"
    writable = gblastn("search", "-db", folder / "db", "-query", query, "-device", "cpu")
    assert writable.returncode == 0 and b"subj" in writable.stdout, writable.stderr
    before = sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*"))
    run = read_only_runner(folder)
    if run is None:
        pytest.skip("no way here to make a folder read-only for this user")
    searched = run(["search", "-db", folder / "db", "-query", query, "-device", "cpu"])
    assert searched.returncode == 0, searched.stderr
    assert searched.stdout == writable.stdout
    listed = run(["dbcmd", "-db", folder / "db", "-entry", "subj"])
    assert listed.returncode == 0 and listed.stdout.startswith(b">subj one\n")
    rebuilt = run(["makedb", "-in", fasta, "-out", folder / "db"])
    assert_clean_failure(rebuilt, "cannot write the database", 4)
    assert sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*")) == before


def test_a_database_a_failed_search_left_open_is_opened_again(tmp_path):
    """A search that fails leaves its database open (Database.abandon), and LMDB opens a
    file once per process: held only by a reference cycle (a traceback's frames), it is
    collected and the database opens again; still held, the error says so."""
    make_db([str(write_fasta(tmp_path / "a.fa", random_records(1, 3, 500, "s")))],
            str(tmp_path / "db"), progress=False)
    left = open_db(str(tmp_path / "db"))
    left.abandon()
    cycle = [left]
    cycle.append(cycle)
    del left, cycle
    gc.disable()  # the cycle outlives the open below, as it may between collections
    try:
        again = open_db(str(tmp_path / "db"))
    finally:
        gc.enable()
    again.abandon()
    with pytest.raises(DatabaseError, match="still open in this process"):
        open_db(str(tmp_path / "db"))
    again.close()
    open_db(str(tmp_path / "db")).close()
