#!/usr/bin/env python3
"""Every link in the tree's Markdown, and every docs/<page>.md#<anchor> that code cites, resolves.

  check_links.py [ROOT]       ROOT: the repository (default: two folders above this script)
  check_links.py --self-test  plants a tree with good and broken links and checks what is reported

(a) In every Markdown file of the tree (git's tracked and untracked-but-not-ignored files, as
    `git ls-files` lists them; a folder that is not a git work tree is walked instead), every
    relative link -- inline `[text](target)`, an image, a reference definition `[label]: target`,
    an HTML href/src -- must name a file or folder of the tree, and its #anchor, where it has one
    and the target is Markdown, must be a heading of the target (GitHub's slugs: lower case,
    punctuation other than - and _ dropped, spaces to -, repeated headings -1, -2, ...) or an
    explicit <a name/id>. Links with a scheme (http:, https:, mailto:, ...) are not checked; a
    target that is on disk but ignored by git (a build output, a raw trace) is broken, since it is
    not in the repository. Fenced code blocks and code spans are not links.
(b) In every source file (.h .hpp .cpp .cc .cu .cuh .py .sh .cjs .mjs .js .cmake .toml,
    CMakeLists.txt, and scripts without an extension that start with #!), every
    `docs/<page>.md` and `docs/<page>.md#<anchor>` (a path from the repository root) must resolve
    the same way.

Prints each broken link as file:line: ..., then "N links checked, M broken"; exit status 1 when
M > 0. Standard library only.
"""
import os
import re
import subprocess
import sys
import tempfile
import unicodedata
import urllib.parse

SOURCE_EXTS = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".py", ".sh", ".cjs", ".mjs", ".js",
               ".cmake", ".toml"}
WALK_SKIP = {".git", "node_modules", "cache", ".cache"}

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# The destination of an inline link or image: what follows "](" up to the closing ")", with an
# optional title. Matching "](" rather than the whole "[text](" also finds a link around an image.
INLINE = re.compile(r"\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
                    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)"
                    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*$")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*\"([^\"]*)\"", re.I)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:name|id)\s*=\s*\"([^\"]*)\"", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SOURCE_CITE = re.compile(r"(?<![A-Za-z0-9_./-])(docs/[A-Za-z0-9_./-]*?\.md)(?:#([A-Za-z0-9_-]+))?")


def list_files(root):
    """The tree's files, relative to root: git's view where root is a work tree's top."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(root):
            out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                                  "--exclude-standard"], capture_output=True, check=True).stdout
            names = sorted({n.decode("utf-8", "surrogateescape") for n in out.split(b"\0") if n})
            return [n for n in names if os.path.isfile(os.path.join(root, n))]
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in WALK_SKIP and not d.startswith("build"))
        for f in sorted(files):
            found.append(os.path.relpath(os.path.join(folder, f), root).replace(os.sep, "/"))
    return found


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link or image: its text
    text = re.sub(r"<[^>]+>", "", text)                      # HTML tags
    out = []
    for ch in text.strip().lower():
        cat = unicodedata.category(ch)
        if ch == " ":
            out.append("-")
        elif ch == "-" or cat[0] in "LMN" or cat == "Pc":
            out.append(ch)
    return "".join(out)


def strip_code_spans(line):
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def markdown_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                continue
            yield number, line
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and \
                not line.strip()[len(m.group(1)):].strip():
            fence = None


def anchors_of(text):
    anchors, seen = set(), {}
    previous = ""
    for _, line in markdown_lines(text):
        heading = None
        m = ATX.match(line)
        if m:
            heading = m.group(2) or ""
        elif SETEXT.match(line) and previous.strip() and not previous.lstrip().startswith(
                ("|", "#", ">", "-", "*", "+", "<")) and not ATX.match(previous):
            heading = previous.strip()
        if heading is not None:
            base = slug(heading)
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else f"{base}-{n}")
        for a in HTML_ANCHOR.findall(line):
            anchors.add(a)
        previous = line
    return anchors


class Checker:
    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.files = list_files(self.root)
        self.file_set = set(self.files)
        self.dirs = set()
        for f in self.files:
            parts = f.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))
        self._anchors = {}
        self.checked = 0
        self.broken = []

    def anchors(self, rel):
        if rel not in self._anchors:
            with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
                self._anchors[rel] = anchors_of(f.read())
        return self._anchors[rel]

    def resolve(self, where, line, shown, path, anchor):
        """Checks `path` (relative to the root, normalised) and `anchor`; records what is broken."""
        self.checked += 1
        if path is None:
            self.broken.append(f"{where}:{line}: {shown}: outside the repository")
            return
        if path not in self.file_set and path not in self.dirs and path != "":
            why = "ignored by git, not in the repository" if os.path.exists(
                os.path.join(self.root, path)) else "no such file"
            self.broken.append(f"{where}:{line}: {shown}: {why}")
            return
        if anchor and path.endswith(".md") and path in self.file_set:
            if urllib.parse.unquote(anchor) not in self.anchors(path):
                self.broken.append(
                    f"{where}:{line}: {shown}: no heading or anchor #{anchor} in {path}")

    def normalise(self, base_dir, target):
        joined = target[1:] if target.startswith("/") else os.path.join(base_dir, target)
        path = os.path.normpath(joined).replace(os.sep, "/")
        if path == ".":
            return ""
        if path == ".." or path.startswith("../") or os.path.isabs(path):
            return None
        return path

    def check_markdown(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        base_dir = os.path.dirname(rel)
        for number, raw in markdown_lines(text):
            line = strip_code_spans(raw)
            targets = [m.group(1) for m in INLINE.finditer(line)]
            m = REFDEF.match(line)
            if m:
                targets.append(m.group(2))
            targets += HTML_LINK.findall(line)
            for target in targets:
                target = target.strip()
                if target.startswith("<") and target.endswith(">"):
                    target = target[1:-1]
                if not target or SCHEME.match(target) or target.startswith("//"):
                    continue
                path_part, _, anchor = target.partition("#")
                path_part = urllib.parse.unquote(path_part.split("?")[0])
                path = rel if path_part == "" else self.normalise(base_dir, path_part)
                self.resolve(rel, number, target, path, anchor)

    def check_source(self, rel):
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            return
        for number, line in enumerate(text.split("\n"), 1):
            for m in SOURCE_CITE.finditer(line):
                self.resolve(rel, number, m.group(0), self.normalise("", m.group(1)), m.group(2))

    def is_source(self, rel):
        name = os.path.basename(rel)
        ext = os.path.splitext(name)[1]
        if name == "CMakeLists.txt" or ext in SOURCE_EXTS:
            return True
        if ext == "":
            try:
                with open(os.path.join(self.root, rel), "rb") as f:
                    return f.read(2) == b"#!"
            except OSError:
                return False
        return False

    def run(self):
        for rel in self.files:
            if rel.endswith(".md"):
                self.check_markdown(rel)
            elif self.is_source(rel):
                self.check_source(rel)
        return self.broken


def report(checker):
    for b in checker.broken:
        print(b)
    print(f"{checker.checked} links checked, {len(checker.broken)} broken")
    return 1 if checker.broken else 0


def self_test():
    d = "docs"  # spelt apart, so that this file's own source cites no page
    planted = {
        f"{d}/a.md": ("# Title\n"
                      "## Section One\n"
                      "[good](b.md#target-heading) [same page](#section-one)\n"
                      "[web](https://example.com/x.md) [broken file](missing.md) and\n"
                      "[broken anchor](b.md#nope)\n"
                      "```\n[in a code block](nowhere.md)\n```\n"
                      "`[in a code span](nowhere.md)` [folder](../src/)\n"
                      "[second](b.md#target-heading-1)\n"
                      "[not a definition]: because the line goes on (a title) and on\n"),
        f"{d}/b.md": "# Target heading\n\n## Target heading\n\nSetext `heading`, too\n---\n",
        "src/x.cpp": (f"// see {d}/b.md#target-heading-1 and {d}/b.md#setext-heading-too\n"
                      f"// and {d}/b.md#gone\n"),
        "README.md": f"[docs]({d}/a.md#section-one) [outside](../elsewhere.md)\n",
    }
    expected = [
        "README.md:1: ../elsewhere.md: outside the repository",
        f"{d}/a.md:4: missing.md: no such file",
        f"{d}/a.md:5: b.md#nope: no heading or anchor #nope in {d}/b.md",
        f"src/x.cpp:2: {d}/b.md#gone: no heading or anchor #gone in {d}/b.md",
    ]
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        checker = Checker(root)
        checker.run()
    got = sorted(checker.broken)
    if got != sorted(expected) or checker.checked != 11:
        print("self-test FAILED")
        print("expected:\n  " + "\n  ".join(sorted(expected)) + "\n(11 links checked)")
        print("got:\n  " + "\n  ".join(got) + f"\n({checker.checked} links checked)")
        return 1
    print(f"self-test: the {len(expected)} planted broken links reported, the 7 good ones not")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..")
    checker = Checker(root)
    checker.run()
    return report(checker)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
