"""The error boundary: domain errors become one clear line and an exit code, never a traceback."""
from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from kreassign.cluster.errors import ExitStatus, KreassignError


def run_guarded(body: Callable[[], Any], *, debug: bool = False) -> int:
    """Run a click entry point with standalone_mode=False and translate what escapes it."""
    try:
        result = body()
    except KreassignError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"Error: {exc}", err=True)
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return int(ExitStatus.INTERRUPTED)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return int(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return int(ExitStatus.INTERRUPTED)
    except ValueError as exc:
        if "null byte" not in str(exc):
            raise
        # click.Path checks a file name with os.stat, which refuses a NUL byte with ValueError.
        click.echo("Error: a file name on the command line contains a NUL byte", err=True)
        return int(ExitStatus.USAGE)
    except BrokenPipeError:
        sys.stderr.close()
        return int(ExitStatus.ERROR)
    return int(result) if isinstance(result, int) else int(ExitStatus.OK)
