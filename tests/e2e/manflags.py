#!/usr/bin/env python3
"""manflags.py PAGE HELP [OTHER_HELP...]: compare an mdoc man page with the
--help output of the program it describes (HELP, a file) and print one
line per disagreement; exit 1 if there is any.

  - every long flag that --help shows in its usage or starts an option
    line with is an .It Fl item of DESCRIPTION, with the short flag --help
    pairs it with ("-s, --server"), if any; any other it prints (in prose:
    "a symbolizer started with --http") is a .Fl somewhere in the page;
  - every flag of SYNOPSIS and of an .It Fl item is one that --help
    prints, and a short flag goes with the long one --help pairs it with;
  - every flag of SYNOPSIS has an .It Fl item, and the items follow the
    order of SYNOPSIS (OpenBSD's style: one .It per flag, in that order);
  - any other .Fl in the page (prose, cross-references) names a flag of
    one of the programs (HELP or OTHER_HELP), so that a renamed flag
    leaves no stale mention behind;
  - the page has the sections a reader expects, and NAME, .Dt and the
    file name agree.

Flags are read from the mdoc macros, not from the rendered text, and from
the whole of --help, so that line wrapping changes nothing.
"""
import fnmatch
import os
import re
import sys

# A long flag in --help: "--name", not "--" alone, not a pattern ("--tls-*").
HELP_LONG = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*[a-z0-9]|[a-z0-9])(?![\w*-])")
# An option line of --help: "  -s, --server ADDR ...", "      --syslog".
HELP_PAIR = re.compile(r"^\s*-([A-Za-z0-9]), --([a-z0-9][a-z0-9-]*)", re.M)
HELP_OPTION = re.compile(r"^\s*(?:-[A-Za-z0-9], )?--([a-z0-9][a-z0-9-]*)", re.M)
# mdoc macro names (callable ones end a Fl's arguments).
MACRO = re.compile(r"^(%[A-Z]|[A-Z][a-z]{1,2})$")
DELIM = re.compile(r"^[|,.;:()\[\]!?]+$")
REQUIRED = ["NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "EXAMPLES", "SEE ALSO"]


def tokens(line):
    """The arguments of a macro line, double quotes honoured."""
    out, cur, quoted, have = [], "", False, False
    for ch in line:
        if ch == '"':
            quoted, have = not quoted, True
        elif ch in " \t" and not quoted:
            if have:
                out.append(cur)
            cur, have = "", False
        else:
            cur, have = cur + ch, True
    if have:
        out.append(cur)
    return out


def fl_flags(toks):
    """The flags of the Fl macros among toks: Fl -server -> --server."""
    flags, i = [], 0
    while i < len(toks):
        if toks[i] == "Fl":
            i += 1
            while i < len(toks) and not MACRO.match(toks[i]) and not DELIM.match(toks[i]):
                if toks[i] != "-":  # "Fl -" is the bare "--"
                    flags.append("-" + toks[i])
                i += 1
        else:
            i += 1
    return flags


def parse_page(path):
    page = {"sections": [], "synopsis": [], "items": [], "all": [], "nm": None, "dt": None}
    section = None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.startswith("."):
            continue
        toks = tokens(line[1:])
        if not toks:
            continue
        if toks[0] == "Sh":
            section = " ".join(toks[1:])
            page["sections"].append(section)
            continue
        if toks[0] == "Dt" and len(toks) >= 3:
            page["dt"] = (toks[1], toks[2])
        if toks[0] == "Nm" and section == "NAME" and len(toks) > 1:
            page["nm"] = toks[1]
        flags = fl_flags(toks)
        page["all"] += flags
        if section == "SYNOPSIS":
            page["synopsis"] += [f for f in flags if f not in page["synopsis"]]
        elif section == "DESCRIPTION" and toks[0] == "It" and len(toks) > 1 and toks[1] == "Fl":
            page["items"].append((flags, line))
    return page


def help_flags(path):
    """Its long flags: all, those of its usage and option lines; and the
    short flag of each long one that has one."""
    text = open(path, encoding="utf-8", errors="replace").read()
    longs = {"--" + m for m in HELP_LONG.findall(text)}
    usage = text.split("\n\n", 1)[0] if text.startswith("usage:") else ""
    options = {"--" + m for m in HELP_LONG.findall(usage) + HELP_OPTION.findall(text)}
    pairs = {"--" + l: "-" + s for s, l in HELP_PAIR.findall(text)}
    return longs, options, pairs


def main():
    page_path, help_path, others = sys.argv[1], sys.argv[2], sys.argv[3:]
    name = os.path.basename(page_path)
    page = parse_page(page_path)
    longs, options, pairs = help_flags(help_path)
    shorts = {s: l for l, s in pairs.items()}
    known = set(longs)
    for o in others:
        known |= help_flags(o)[0]
    problems = []

    def bad(msg):
        problems.append(f"{name}: {msg}")

    # The page's frame: sections, name, title.
    for s in REQUIRED:
        if s not in page["sections"]:
            bad(f"no {s} section")
    base, _, sect = name.rpartition(".")
    if page["nm"] != base:
        bad(f"NAME says {page['nm']}, the file is {name}")
    if page["dt"] != (base.upper(), sect):
        bad(f".Dt {page['dt']} is not ({base.upper()}, {sect})")

    # --help -> page.
    item_flags = [set(f) for f, _ in page["items"]]
    for l in sorted(longs):
        its = [f for f in item_flags if l in f]
        if l not in options:
            if l not in page["all"]:
                bad(f"{l}: printed by --help, no .Fl in the page")
        elif not its:
            bad(f"{l}: an option of --help, no .It Fl item in DESCRIPTION")
        elif l in pairs and not any(pairs[l] in f for f in its):
            bad(f"{l}: --help pairs it with {pairs[l]}, its .It does not")

    # page -> --help.
    for f in page["synopsis"] + [f for fl, _ in page["items"] for f in fl]:
        if f.startswith("--"):
            if f not in longs:
                bad(f"{f}: in SYNOPSIS or an .It, not printed by --help")
        elif f not in shorts:
            bad(f"{f}: in SYNOPSIS or an .It, --help pairs no long flag with it")
    for flags, line in page["items"]:
        for f in flags:
            if f in shorts and shorts[f] not in flags:
                bad(f"{f}: its .It lacks {shorts[f]} ({line})")

    # SYNOPSIS <-> items, in order.
    last = -1
    described = set()
    for flags, line in page["items"]:
        idx = [page["synopsis"].index(f) for f in flags if f in page["synopsis"]]
        if not idx:
            bad(f"item not in SYNOPSIS: {line}")
            continue
        described.update(flags)
        if min(idx) <= last:
            bad(f"item out of the order of SYNOPSIS: {line}")
        last = min(idx)
    for f in page["synopsis"]:
        if f not in described:
            bad(f"{f}: in SYNOPSIS, no .It Fl item in DESCRIPTION")

    # Every other .Fl: a flag of some program.
    for f in sorted(set(page["all"])):
        if f.startswith("--") and not any(fnmatch.fnmatchcase(k, f) for k in known):
            bad(f"{f}: mentioned, but no program's --help prints it")

    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
