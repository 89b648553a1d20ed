"""Reading campaign specs back from the results DB and export files, whatever version of the
spec model stored them: a compatibility pass brings an older spec to the current model first.

The spec model forbids what a new spec may no longer say (managed targets' ``binary:`` and
``basedir:`` gave way to ``build:``), but campaigns recorded before then stay readable: their
reports, comparisons, exports and status must not fail on what was valid when they ran.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from services.common.errors import StoreError
from services.common.spec.campaign import MAX_DESCRIPTION, CampaignSpec
from services.common.spec.fields import STORED

#: Managed-target fields of earlier spec models, removed since (a spec names no path on a worker).
REMOVED_TARGET_PATHS = ("binary", "basedir")


def upgrade(doc: Any) -> Any:
    """A stored spec document (parsed JSON) in the current model's shape: removed target paths
    dropped; a path that was set is kept for readers in the campaign's description. Anything that
    is not a spec document passes unchanged, for the model to refuse."""
    if not isinstance(doc, dict) or not isinstance(doc.get("targets"), list):
        return doc
    notes: list[str] = []
    targets = []
    for t in doc["targets"]:
        if isinstance(t, dict) and any(k in t for k in REMOVED_TARGET_PATHS):
            t = dict(t)
            for key in REMOVED_TARGET_PATHS:
                value = t.pop(key, None)
                if value:
                    notes.append(f"target {t.get('name')} {key}: {value}")
        targets.append(t)
    out = {**doc, "targets": targets}
    if notes:
        # Said where every reader of the spec sees it: which server such a target ran.
        note = "(recorded before build: names; " + "; ".join(notes) + ")"
        text = str(doc.get("description") or "")
        out["description"] = (f"{text} {note}" if text else note)[:MAX_DESCRIPTION]
    return out


def read_stored_spec(text: str | bytes, campaign_id: str) -> CampaignSpec:
    """The spec recorded with campaign ``campaign_id``; StoreError naming the campaign and the
    field when even the compatibility pass leaves it unreadable."""
    try:
        return CampaignSpec.model_validate(upgrade(json.loads(text)), context=STORED)
    except json.JSONDecodeError as e:
        raise StoreError(f"campaign {campaign_id}: its stored spec is not JSON: {e}") from None
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "spec"
        raise StoreError(f"campaign {campaign_id}: its stored spec does not decode with this version: "
                         f"{where}: {err['msg']}") from None
