#!/usr/bin/python3
"""The training corpus: the King James Bible from Debian's bible-kjv-text, split by book.

    /usr/bin/python3 tools/train/prepare_corpus.py --out tools/train/data/corpus

Reads the text with the `bible` program (Debian package bible-kjv, which decodes
/usr/lib/bible.data of bible-kjv-text), writes one chapter per line (verses joined by a
space, verse numbers dropped) into train.txt, validation.txt and test.txt, and corpus.json
recording the packages, their versions, the license statement, the split and checksums.

Split (fixed, by whole book). Held-out books were chosen to have no near-parallel text in
the training books (the synoptic gospels repeat each other, Chronicles repeats Kings, ...),
so the held-out loss measures English, not recall of a parallel passage:
    validation: Ruth, Ecclesiastes, Jonah, Acts      (used to pick the checkpoint)
    test:       Esther, Song of Solomon, Galatians, James   (reported once, at the end)
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

# The 66 books in the order `bible` prints them, with its abbreviations.
BOOKS = [
    ("Ge", "Genesis"), ("Exo", "Exodus"), ("Lev", "Leviticus"), ("Num", "Numbers"),
    ("Deu", "Deuteronomy"), ("Josh", "Joshua"), ("Jdgs", "Judges"), ("Ruth", "Ruth"),
    ("1Sm", "1 Samuel"), ("2Sm", "2 Samuel"), ("1Ki", "1 Kings"), ("2Ki", "2 Kings"),
    ("1Chr", "1 Chronicles"), ("2Chr", "2 Chronicles"), ("Ezra", "Ezra"), ("Neh", "Nehemiah"),
    ("Est", "Esther"), ("Job", "Job"), ("Psa", "Psalms"), ("Prv", "Proverbs"),
    ("Eccl", "Ecclesiastes"), ("SSol", "Song of Solomon"), ("Isa", "Isaiah"),
    ("Jer", "Jeremiah"), ("Lam", "Lamentations"), ("Eze", "Ezekiel"), ("Dan", "Daniel"),
    ("Hos", "Hosea"), ("Joel", "Joel"), ("Amos", "Amos"), ("Obad", "Obadiah"),
    ("Jonah", "Jonah"), ("Mic", "Micah"), ("Nahum", "Nahum"), ("Hab", "Habakkuk"),
    ("Zep", "Zephaniah"), ("Hag", "Haggai"), ("Zec", "Zechariah"), ("Mal", "Malachi"),
    ("Mat", "Matthew"), ("Mark", "Mark"), ("Luke", "Luke"), ("John", "John"), ("Acts", "Acts"),
    ("Rom", "Romans"), ("1Cor", "1 Corinthians"), ("2Cor", "2 Corinthians"),
    ("Gal", "Galatians"), ("Eph", "Ephesians"), ("Phi", "Philippians"), ("Col", "Colossians"),
    ("1Th", "1 Thessalonians"), ("2Th", "2 Thessalonians"), ("1Tim", "1 Timothy"),
    ("2Tim", "2 Timothy"), ("Titus", "Titus"), ("Phmn", "Philemon"), ("Heb", "Hebrews"),
    ("Jas", "James"), ("1Pet", "1 Peter"), ("2Pet", "2 Peter"), ("1Jn", "1 John"),
    ("2Jn", "2 John"), ("3Jn", "3 John"), ("Jude", "Jude"), ("Rev", "Revelation"),
]
SPLIT_BOOKS = {
    "validation": ["Ruth", "Ecclesiastes", "Jonah", "Acts"],
    "test": ["Esther", "Song of Solomon", "Galatians", "James"],
}
PACKAGES = ["bible-kjv-text", "bible-kjv"]
COPYRIGHT_FILE = "/usr/share/doc/bible-kjv-text/copyright"
VERSE_LINE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def package_version(name):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True,
                         text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def read_verses():
    """[(book name, chapter, verse, text)] for the whole Bible, in order."""
    try:
        out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True,
                             check=True)
    except FileNotFoundError:
        sys.exit("prepare_corpus: the `bible` program is missing: apt-get install bible-kjv")
    names = dict(BOOKS)
    verses = []
    for line in out.stdout.decode("ascii").splitlines():
        m = VERSE_LINE.match(line)
        if not m or m.group(1) not in names:
            sys.exit(f"prepare_corpus: unexpected line from `bible`: {line[:80]!r}")
        verses.append((names[m.group(1)], int(m.group(2)), int(m.group(3)),
                       " ".join(m.group(4).split())))
    return verses


def chapters(verses):
    """[(book, chapter, text)]: verses of a chapter joined by one space."""
    out = []
    for book, chapter, _, text in verses:
        if out and out[-1][0] == book and out[-1][1] == chapter:
            out[-1][2].append(text)
        else:
            out.append((book, chapter, [text]))
    return [(b, c, " ".join(t)) for b, c, t in out]


def split_of(book):
    for split, books in SPLIT_BOOKS.items():
        if book in books:
            return split
    return "train"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--out", default="tools/train/data/corpus")
    args = parser.parse_args()

    verses = read_verses()
    books_seen = list(dict.fromkeys(v[0] for v in verses))
    if books_seen != [name for _, name in BOOKS] or len(verses) != 31102:
        sys.exit(f"prepare_corpus: expected 66 books and 31102 verses, got {len(books_seen)} "
                 f"books and {len(verses)} verses")
    os.makedirs(args.out, exist_ok=True)
    splits = {}
    for split in ("train", "validation", "test"):
        rows = [(b, c, t) for b, c, t in chapters(verses) if split_of(b) == split]
        text = "".join(t + "\n" for _, _, t in rows)
        path = os.path.join(args.out, f"{split}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        splits[split] = {
            "file": f"{split}.txt",
            "books": list(dict.fromkeys(b for b, _, _ in rows)),
            "chapters": len(rows),
            "words": sum(len(t.split()) for _, _, t in rows),
            "bytes": len(text.encode("utf-8")),
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        }
        print(f"{split:>10}: {len(rows):5d} chapters, {splits[split]['words']:7d} words, "
              f"{splits[split]['bytes']:8d} bytes -> {path}")
    with open(COPYRIGHT_FILE, encoding="utf-8", errors="replace") as f:
        copyright_text = f.read()
    meta = {
        "corpus": "King James Version of the Bible (1611/1769 text)",
        "source": {
            "debian_packages": {p: package_version(p) for p in PACKAGES},
            "text_file": "/usr/lib/bible.data (bible-kjv-text), decoded by `bible -f "
                         "Gen1:1-Rev22:21` (bible-kjv)",
            "license": "The KJV text is in the public domain (Debian's copyright file: "
                       "'The copyright for the King James Version text of the Bible is "
                       "expired'); the data file's legend: 'Users may copy, modify or "
                       "distribute this file at will.' In the United Kingdom the KJV is "
                       "under the Crown's perpetual letters patent.",
            "copyright_file": COPYRIGHT_FILE,
            "copyright_file_sha256": hashlib.sha256(copyright_text.encode()).hexdigest(),
        },
        "format": "one chapter per line; verses joined by a single space; verse numbers "
                  "and book/chapter headings dropped",
        "split_rule": SPLIT_BOOKS,
        "splits": splits,
    }
    with open(os.path.join(args.out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
