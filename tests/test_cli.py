

def test_every_command_and_verb_prints_its_help():
    """argparse formats help strings with %: a bare "% of copy" in one ends `--help` in a traceback."""
    import argparse
    from workbench.cli import build_parser

    def walk(parser, path):
        parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, path + [name])
    walk(build_parser(), ["workbench"])
