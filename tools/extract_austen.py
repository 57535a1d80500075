"""Rebuild src/attention_book/texts/*.txt from Debian's r-cran-janeaustenr package (provenance check).

    apt-get download r-cran-janeaustenr          # r-cran-janeaustenr_1.0.0-1_all.deb (Debian 12)
    pip install rdata                             # reads R's serialization format; not a course dependency
    python tools/extract_austen.py r-cran-janeaustenr_1.0.0-1_all.deb [--write]

Without ``--write`` it only compares what it extracts with the shipped files (SHA-256) and
says whether they are identical. What it changes is listed in src/attention_book/texts/README.md.
The package keeps its data in R's lazy-load database: ``Rdata.rdx`` (a gzip-compressed index,
name -> byte range) and ``Rdata.rdb`` (per object: 4 bytes of length, then zlib-compressed R
serialization).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ROOT / "src" / "attention_book" / "texts"
# R object name in janeaustenr -> file stem shipped with the course
NAMES = {"sensesensibility": "sense_and_sensibility", "prideprejudice": "pride_and_prejudice",
         "mansfieldpark": "mansfield_park", "emma": "emma", "northangerabbey": "northanger_abbey",
         "persuasion": "persuasion"}
EDITORS_NOTE = "A NOTE ON THE TEXT"  # Northanger Abbey's last section, by a modern edition's editors


def extract(deb: Path) -> dict:
    import warnings

    import rdata

    warnings.simplefilter("ignore")  # rdata warns that the index has no RDS magic number
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["dpkg-deb", "-x", str(deb), folder], check=True)
        data = Path(folder) / "usr/lib/R/site-library/janeaustenr/data"
        index = rdata.conversion.convert(rdata.parser.parse_data(gzip.decompress((data / "Rdata.rdx").read_bytes())))
        database = (data / "Rdata.rdb").read_bytes()
    texts = {}
    for name, (offset, length) in index["variables"].items():
        blob = database[offset:offset + length]
        raw = zlib.decompress(blob[4:])
        assert len(raw) == int.from_bytes(blob[:4], "big"), name
        lines = rdata.conversion.convert(rdata.parser.parse_data(raw))
        text = "\n".join(str(line) for line in lines)
        if name == "northangerabbey":
            text = text[:text.index(EDITORS_NOTE)]
        texts[NAMES[str(name)]] = text.rstrip() + "\n"
    return texts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("deb", type=Path)
    parser.add_argument("--write", action="store_true", help="overwrite the shipped files")
    args = parser.parse_args(argv)
    same = True
    for stem, text in extract(args.deb).items():
        path = TEXTS / f"{stem}.txt"
        new = hashlib.sha256(text.encode("utf-8")).hexdigest()
        old = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "(missing)"
        print(f"{stem:<22} {len(text):>8,} characters  {new[:16]}  {'same' if new == old else 'DIFFERENT'}")
        same &= new == old
        if args.write:
            path.write_text(text, encoding="utf-8")
    return 0 if same or args.write else 1


if __name__ == "__main__":
    sys.exit(main())
