"""The results DB's stored procedures: the only way a submitter writes. Each runs with its definer's
rights (SQL SECURITY DEFINER) and acts on the caller's own campaigns only.

MariaDB grants by table, never by row, so a submitter's role holds SELECT and EXECUTE on these
procedures, nothing else (docs/security.md). The caller is the user name of USER(), the login
(CURRENT_USER() inside a DEFINER procedure is the definer); the campaign row keeps it in
``submitter``. A campaign without one (recorded before migration 24, or imported) is the operator's.

deploy/ensure-services makes and replaces them in the fleet's results DB with the definer role
``<prefix>_procedures`` (``script``); on a DB that has none of them (the tests' own), the store makes
them as the first user that may (``StoreConnection.migrate``). The store never replaces them: the
one replacing would become their definer, and every submitter's CALL would then fail. This module imports nothing of
benchfleet, so ensure-services loads the file by itself.
"""

from __future__ import annotations

#: In each procedure's COMMENT: a procedure whose comment differs is made again. Raise it with
#: every change of a body or signature.
VERSION = "benchfleet procedures 2"
#: 2: bf_add_runs refuses a run id that does not start with the campaign id and a dot.

_CALLER = "SUBSTRING_INDEX(USER(), '@', 1)"
#: SQLSTATE of a refusal; MariaDB gives it MySQL error 1644 (ER_SIGNAL_EXCEPTION).
REFUSED_SQLSTATE = "45000"
REFUSED_ERRNO = 1644

# The campaign of p_campaign_id locked for the rest of the transaction, its submitter and state read.
_OWNER = """
  SELECT 1, submitter, state INTO v_found, v_submitter, v_state FROM campaigns
    WHERE campaign_id = p_campaign_id FOR UPDATE;"""
_DECLARE = """
  DECLARE v_found INT DEFAULT 0;
  DECLARE v_submitter VARCHAR(128) DEFAULT NULL;
  DECLARE v_state VARCHAR(32) DEFAULT NULL;
  DECLARE v_msg VARCHAR(128);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = 0;"""


def _not_yours(action: str) -> str:
    """The refusal when the campaign is not the caller's: who recorded it, and who may act instead.
    A SIGNAL's text holds at most 128 characters (longer is an error under a strict sql_mode), so it
    names neither the campaign (the caller knows it) nor more than 40 characters of the submitter."""
    return f"""
  IF v_submitter IS NULL OR v_submitter <> {_CALLER} THEN
    SET v_msg = IF(v_submitter IS NULL,
      'has no recorded submitter (it is the operator''s): only an operator may {action} it',
      CONCAT('was submitted by ', LEFT(v_submitter, 40), ': only its submitter or an operator may {action} it'));
    SIGNAL SQLSTATE '{REFUSED_SQLSTATE}' SET MESSAGE_TEXT = v_msg;
  END IF;"""


#: (name, parameters and body after the name). MODIFIES SQL DATA is advisory; SQL SECURITY DEFINER
#: is what lets a submitter write through them.
PROCEDURES: tuple[tuple[str, str], ...] = (
    # A new campaign, recorded as the caller's, with its idempotency key.
    ("bf_record_campaign", f"""(IN p_campaign_id VARCHAR(128), IN p_name VARCHAR(64), IN p_spec_json LONGTEXT,
    IN p_spec_hash CHAR(64), IN p_pool VARCHAR(64), IN p_baseline VARCHAR(64), IN p_total_runs INT,
    IN p_created_at DOUBLE, IN p_publisher VARCHAR(128), IN p_key VARCHAR(128))
  MODIFIES SQL DATA SQL SECURITY DEFINER COMMENT '{VERSION}'
  INSERT INTO campaigns (campaign_id, name, spec_json, spec_hash, pool, baseline, total_runs, state, created_at,
                         publisher, idempotency_key, submitter)
  VALUES (p_campaign_id, p_name, p_spec_json, p_spec_hash, p_pool, p_baseline, p_total_runs, 'submitted',
          p_created_at, p_publisher, p_key, {_CALLER})"""),
    # Planned runs of the caller's campaign while it is being submitted: a JSON array of
    # [run_id, seq, target, workload, threads, repetition] (one call per chunk: a plan of 100,000
    # runs does not fit one packet).
    ("bf_add_runs", f"""(IN p_campaign_id VARCHAR(128), IN p_runs LONGTEXT, IN p_now DOUBLE)
  MODIFIES SQL DATA SQL SECURITY DEFINER COMMENT '{VERSION}'
BEGIN{_DECLARE}{_OWNER}{_not_yours("add runs to")}
  IF v_state <> 'submitted' THEN
    SET v_msg = CONCAT('is ', v_state, ': runs are added only while it is submitted');
    SIGNAL SQLSTATE '{REFUSED_SQLSTATE}' SET MESSAGE_TEXT = v_msg;
  END IF;
  -- Run ids are predictable (messages/runs.py run_id_of): a run id of another campaign would squat
  -- that campaign's run. LEFT, not LIKE: a campaign id may hold LIKE's wildcards.
  IF EXISTS (SELECT 1 FROM JSON_TABLE(p_runs, '$[*]' COLUMNS (run_id VARCHAR(255) PATH '$[0]')) AS j
             WHERE j.run_id IS NULL OR LEFT(j.run_id, CHAR_LENGTH(p_campaign_id) + 1) <> CONCAT(p_campaign_id, '.')) THEN
    SET v_msg = 'has a run id that does not start with its campaign id and a dot';
    SIGNAL SQLSTATE '{REFUSED_SQLSTATE}' SET MESSAGE_TEXT = v_msg;
  END IF;
  INSERT INTO runs (run_id, campaign_id, seq, target, workload, threads, repetition, state, updated_at)
    SELECT j.run_id, p_campaign_id, j.seq, j.target, j.workload, j.threads, j.repetition, 'pending', p_now
    FROM JSON_TABLE(p_runs, '$[*]' COLUMNS (run_id VARCHAR(255) PATH '$[0]', seq INT PATH '$[1]',
      target VARCHAR(64) PATH '$[2]', workload VARCHAR(64) PATH '$[3]', threads INT PATH '$[4]',
      repetition INT PATH '$[5]')) AS j;
END"""),
    # Take the caller's campaign back out when its runs could not be published: only while no
    # run of it has begun (a campaign under way is cancelled, never removed).
    ("bf_withdraw_campaign", f"""(IN p_campaign_id VARCHAR(128))
  MODIFIES SQL DATA SQL SECURITY DEFINER COMMENT '{VERSION}'
proc: BEGIN{_DECLARE}{_OWNER}
  IF v_found = 0 THEN
    LEAVE proc;
  END IF;{_not_yours("withdraw")}
  IF v_state <> 'submitted' OR EXISTS (SELECT 1 FROM runs WHERE campaign_id = p_campaign_id AND state <> 'pending') THEN
    SET v_msg = 'has begun: cancel it instead';
    SIGNAL SQLSTATE '{REFUSED_SQLSTATE}' SET MESSAGE_TEXT = v_msg;
  END IF;
  DELETE FROM runs WHERE campaign_id = p_campaign_id;
  DELETE FROM campaigns WHERE campaign_id = p_campaign_id;
END"""),
    # Cancel the caller's campaign: its pending runs cancelled (how many, in p_dropped), its
    # idempotency key released. Running runs are left to their workers. An operator cancels any
    # campaign with plain UPDATEs (store/campaigns.py).
    ("bf_cancel_campaign", f"""(IN p_campaign_id VARCHAR(128), IN p_now DOUBLE, OUT p_dropped INT)
  MODIFIES SQL DATA SQL SECURITY DEFINER COMMENT '{VERSION}'
proc: BEGIN{_DECLARE}
  SET p_dropped = 0;{_OWNER}
  IF v_found = 0 THEN
    LEAVE proc;
  END IF;{_not_yours("cancel")}
  UPDATE runs SET state = 'cancelled', error = 'campaign cancelled before the run started', updated_at = p_now
    WHERE campaign_id = p_campaign_id AND state = 'pending';
  SET p_dropped = ROW_COUNT();
  UPDATE campaigns SET state = 'cancelled', idempotency_key = NULL WHERE campaign_id = p_campaign_id;
END"""),
    # The gate's verdict on the caller's campaign (`--fail-on-slower`), against the campaign it was
    # judged against (NULL: its own baseline target, or no good campaign to judge it against).
    ("bf_record_gate_verdict", f"""(IN p_campaign_id VARCHAR(128), IN p_against VARCHAR(128), IN p_verdict VARCHAR(16),
    IN p_beyond DOUBLE, IN p_slower_cells INT, IN p_now DOUBLE)
  MODIFIES SQL DATA SQL SECURITY DEFINER COMMENT '{VERSION}'
BEGIN{_DECLARE}{_OWNER}
  IF v_found = 0 THEN
    SIGNAL SQLSTATE '{REFUSED_SQLSTATE}' SET MESSAGE_TEXT = 'is not in the results DB';
  END IF;{_not_yours("record a gate verdict for")}
  IF p_verdict NOT IN ('passed', 'failed', 'unjudged') THEN
    SIGNAL SQLSTATE '{REFUSED_SQLSTATE}' SET MESSAGE_TEXT = 'verdict must be passed, failed or unjudged';
  END IF;
  INSERT INTO gate_verdicts (campaign_id, against_campaign, verdict, beyond, slower_cells, judged_at, judged_by)
    VALUES (p_campaign_id, p_against, p_verdict, p_beyond, p_slower_cells, p_now, {_CALLER});
END"""),
)

NAMES = tuple(name for name, _ in PROCEDURES)


def statements(definer: str | None = None, *, replace: bool = True) -> list[tuple[str, str]]:
    """(name, CREATE [OR REPLACE] PROCEDURE statement) for each procedure; ``definer`` (a role or
    'user'@'host', already quoted) when given, else the creating user."""
    how = " OR REPLACE" if replace else ""
    who = f" DEFINER={definer}" if definer else ""
    return [(name, f"CREATE{how}{who} PROCEDURE {name}{body}") for name, body in PROCEDURES]


def outdated(made: dict[str, str]) -> list[tuple[str, str]]:
    """The statements for the procedures missing from ``made`` (name -> COMMENT) or of another version."""
    return [(name, sql) for name, sql in statements() if made.get(name) != VERSION]


def to_make(made: dict[str, str]) -> list[tuple[str, str]]:
    """The statements a store makes for the procedures found (``made``: name -> COMMENT): all of them
    when there are none, the missing ones when the rest are current (CREATE without OR REPLACE: ones
    this user cannot see stay), nothing when every one is current; ValueError naming the stale ones else."""
    ours = {name: comment for name, comment in made.items() if name in NAMES}
    if not ours:
        return statements(replace=False)
    stale = [name for name, _ in outdated(ours)]
    if stale and all(n not in ours for n in stale):
        # Every one there is current and the rest are missing: another service is making them at
        # this moment (a collector's first start beside a submit). Make the missing ones, as CREATE:
        # whichever of the two gets there first makes each, and a user who may not leaves it.
        return [(name, sql) for name, sql in statements(replace=False) if name in stale]
    if stale:
        found = sorted({ours.get(n, "missing") for n in stale})
        if all(_number(f) > _number(VERSION) for f in found):
            fix = "this checkout is older than the results DB's: update it"
        else:
            fix = ("run deploy/ensure-services mariadb (as root) from this checkout, which replaces them with "
                   "the right definer")
        raise ValueError(f"the procedures {', '.join(stale)} are not {VERSION!r} (found: {', '.join(found)}): {fix}")
    return []


def _number(comment: str) -> int:
    """The version number in a procedure's COMMENT; -1 when it has none (missing, or not ours)."""
    tail = comment.rsplit(" ", 1)[-1]
    return int(tail) if comment.startswith("benchfleet procedures ") and tail.isdigit() else -1


def script(definer: str) -> str:
    """Every procedure for the mariadb client (its DELIMITER), made with ``definer``."""
    body = "".join(f"{sql} ;;\n" for _, sql in statements(definer))
    return f"DELIMITER ;;\n{body}DELIMITER ;\n"


if __name__ == "__main__":  # deploy/ensure-services: script(DEFINER) on stdout
    import sys

    sys.stdout.write(script(sys.argv[1]))
