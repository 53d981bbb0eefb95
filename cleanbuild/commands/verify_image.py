"""`verify`: rebuild an image from its own labels here and compare the digests (cleanbuild.images.verify).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cleanbuild.core import engine
from cleanbuild.core.console import console
from cleanbuild.core.errors import (
    UsageError,
)
from cleanbuild.request.build import Request

if TYPE_CHECKING:
    pass

def verify(ref: str, request: Request, *, as_json: bool) -> None:
    """Rebuild ref from its own labels on this engine; exit 1 (StepFailed) naming the first differing layer and file."""
    from cleanbuild.images.verify import check, rebuild_and_compare, summary

    client = engine.client()
    if engine.image_id(client, ref) is None:
        raise UsageError(f"image {ref} not found on this engine. To fix, pull it first (docker pull {ref}).")
    result = rebuild_and_compare(client, ref, request)
    if as_json:
        print(json.dumps(result, indent=2))
    elif result["identical"]:
        console.print(f"[green]✓[/green] {summary(result)}")
    check(result)
