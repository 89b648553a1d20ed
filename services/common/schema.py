"""The results DB schema as ordered migrations; version N is applied once, in order, at start.

History:
  1: campaigns, runs (plan and state), results (one row per run id, whole result as JSON).
  2: index results_cell (target, workload, threads) for `collector history`.
  3: campaigns.idempotency_key: a second submit of the same spec (or key) is refused.
  4: campaigns.state VARCHAR(32) (finished_with_failures is 22 characters).
  5: results.result_z: the whole result, zlib-compressed JSON (result_json is '' in new rows).
  7: results.stalled_s, longest_stall_s, overrun_s, quality_flags: a run's stalls and overrun
     (RunQuality), queryable; NULL for results stored before runs were assessed.
  8: results.quiesce_s: seconds the worker waited for the target to settle before the warm-up.
  10: worker_builds: the last build announcement of each (host, pool), for `scheduler validate`.
"""

from __future__ import annotations

MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE IF NOT EXISTS campaigns (
                campaign_id VARCHAR(128) NOT NULL PRIMARY KEY,
                name VARCHAR(64) NOT NULL,
                spec_json LONGTEXT NOT NULL,
                spec_hash CHAR(64) NOT NULL,
                pool VARCHAR(64) NOT NULL,
                baseline VARCHAR(64) NOT NULL,
                total_runs INT NOT NULL,
                state VARCHAR(16) NOT NULL DEFAULT 'submitted',
                created_at DOUBLE NOT NULL,
                KEY campaigns_name (name, created_at),
                KEY campaigns_hash (spec_hash)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """CREATE TABLE IF NOT EXISTS runs (
                run_id VARCHAR(255) NOT NULL PRIMARY KEY,
                campaign_id VARCHAR(128) NOT NULL,
                seq INT NOT NULL,
                target VARCHAR(64) NOT NULL,
                workload VARCHAR(64) NOT NULL,
                threads INT NOT NULL,
                repetition INT NOT NULL,
                state VARCHAR(16) NOT NULL DEFAULT 'pending',
                attempts INT NOT NULL DEFAULT 0,
                worker VARCHAR(128) NULL,
                started_at DOUBLE NULL,
                ended_at DOUBLE NULL,
                error TEXT NULL,
                updated_at DOUBLE NOT NULL,
                KEY runs_campaign (campaign_id, seq),
                KEY runs_state (campaign_id, state)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """CREATE TABLE IF NOT EXISTS results (
                run_id VARCHAR(255) NOT NULL PRIMARY KEY,
                campaign_id VARCHAR(128) NOT NULL,
                target VARCHAR(64) NOT NULL,
                workload VARCHAR(64) NOT NULL,
                threads INT NOT NULL,
                repetition INT NOT NULL,
                status VARCHAR(16) NOT NULL,
                measured_s DOUBLE NOT NULL,
                transactions BIGINT NOT NULL,
                queries BIGINT NOT NULL,
                errors BIGINT NOT NULL,
                qps DOUBLE NOT NULL,
                tps DOUBLE NOT NULL,
                p50_ms DOUBLE NOT NULL,
                p95_ms DOUBLE NOT NULL,
                p99_ms DOUBLE NOT NULL,
                max_ms DOUBLE NOT NULL,
                worker VARCHAR(128) NOT NULL,
                host VARCHAR(255) NOT NULL,
                started_at DOUBLE NOT NULL,
                ended_at DOUBLE NOT NULL,
                error TEXT NULL,
                result_json LONGTEXT NOT NULL,
                stored_at DOUBLE NOT NULL,
                KEY results_campaign (campaign_id, workload, target, threads)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ],
    ),
    # 2: `collector history` looks a cell up across campaigns; without this index it scans
    # every result ever stored.
    (2, ["CREATE INDEX IF NOT EXISTS results_cell ON results (target, workload, threads)"]),
    (
        3,
        [
            "ALTER TABLE campaigns ADD COLUMN IF NOT EXISTS idempotency_key VARCHAR(128) NULL",
            "CREATE INDEX IF NOT EXISTS campaigns_idempotency ON campaigns (idempotency_key)",
        ],
    ),
    # 4: campaign states such as finished_with_failures did not fit VARCHAR(16).
    (4, ["ALTER TABLE campaigns MODIFY state VARCHAR(32) NOT NULL DEFAULT 'submitted'"]),
    # 5: a result as JSON could outgrow the server's max_allowed_packet; compressed (about a
    # quarter of the size for a long run) it fits far more.
    (5, ["ALTER TABLE results ADD COLUMN IF NOT EXISTS result_z LONGBLOB NULL"]),
    # 7: "which runs stalled" is a WHERE clause, not a scan of every stored result document.
    (
        7,
        [
            "ALTER TABLE results ADD COLUMN IF NOT EXISTS stalled_s INT NULL,"
            " ADD COLUMN IF NOT EXISTS longest_stall_s INT NULL,"
            " ADD COLUMN IF NOT EXISTS overrun_s DOUBLE NULL,"
            " ADD COLUMN IF NOT EXISTS quality_flags VARCHAR(32) NULL",
        ],
    ),
    # 8: the settling wait before each run, queryable across campaigns (NULL: quiesce off, or
    # stored before it existed; the whole record is in result_json's quiesce).
    (8, ["ALTER TABLE results ADD COLUMN IF NOT EXISTS quiesce_s DOUBLE NULL"]),
    # 10: workers announce their registered builds; the scheduler checks a spec's `build:`
    # against them. One row per host and pool, replaced by each announcement (an upsert: the
    # collector's DB user has no DELETE).
    (
        10,
        [
            """CREATE TABLE IF NOT EXISTS worker_builds (
                host VARCHAR(255) NOT NULL,
                pool VARCHAR(64) NOT NULL,
                worker VARCHAR(128) NOT NULL,
                announcement_json TEXT NOT NULL,
                announced_at DOUBLE NOT NULL,
                PRIMARY KEY (host, pool)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ],
    ),
    # 14: which build ran a result is read by every report header: columns, since result_json is
    # empty for results stored compressed (migration 5).
    (
        14,
        [
            "ALTER TABLE results ADD COLUMN IF NOT EXISTS build VARCHAR(64) NULL,"
            " ADD COLUMN IF NOT EXISTS build_version VARCHAR(128) NULL,"
            " ADD COLUMN IF NOT EXISTS server_sha256 CHAR(64) NULL,"
            " ADD COLUMN IF NOT EXISTS malloc VARCHAR(16) NULL",
        ],
    ),
]

LATEST = MIGRATIONS[-1][0]
