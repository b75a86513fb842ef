#!/usr/bin/env python3
"""The Python version of plugind-example-host: runs every available text filter on its input,
then lets every available greeter greet it, answering the greeter's question from the host.

    text_host.py [--name NAME] TEXT...
"""

import argparse
import sys

import plugind

FILTERS = "org.plugind.examples.text-filters"
GREETERS = "org.plugind.examples.greeters"


def run_all(point, text, ask=None):
    monitor = plugind.Monitor(point, scope="none")
    failures = 0
    for identity in monitor.identities:
        try:
            with plugind.Process(identity) as process:
                reply = process.connect(ask=ask).send(text.encode())
                print("%s: %s" % (identity.name, reply.decode(errors="replace")))
        except plugind.Error as error:
            print("text_host.py: %s: %s" % (identity.name, error), file=sys.stderr)
            failures += 1
    if monitor.unapproved_count:
        print("note: %d more plugin(s) of %s wait for approval" % (monitor.unapproved_count, point), file=sys.stderr)
    monitor.close()
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="world", help="whom the greeters greet")
    parser.add_argument("text", nargs="*", help="the input")
    arguments = parser.parse_args()
    text = " ".join(arguments.text)
    failures = run_all(FILTERS, text)
    failures += run_all(GREETERS, text, ask=lambda question: arguments.name.encode())
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
