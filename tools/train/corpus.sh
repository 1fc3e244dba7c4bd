#!/bin/sh
# Prints the default training corpus of rootspec-train, one file a line, in a fixed order.
#
# Corpus: the reStructuredText sources of the Python 3.11 documentation as Debian 12 ships
# them in package python3.11-doc (main; Sphinx keeps every page's source next to its HTML as
# /usr/share/doc/python3.11/html/_sources/**/*.rst.txt): 497 files, about 11 MB of English
# prose and code. License: PSF License Version 2 (see /usr/share/doc/python3.11-doc/copyright).
# Nothing of it is committed; every fresh Debian 12 machine can install it.
#
# Installs the package when missing (apt-get; needs root), then lists the files.
set -eu
DIR=/usr/share/doc/python3.11/html/_sources
if [ ! -d "$DIR" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "corpus.sh: $DIR is missing; run as root or: sudo apt-get install python3.11-doc" >&2
    exit 1
  fi
  (apt-get install -y --no-install-recommends python3.11-doc || {
     apt-get update && apt-get install -y --no-install-recommends python3.11-doc; }) >&2
fi
find "$DIR" -type f -name '*.rst.txt' | LC_ALL=C sort
