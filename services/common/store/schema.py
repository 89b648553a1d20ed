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
  11: for SQL and Grafana: result_series (one row per measured second, filled by the store,
      backfilled here from results kept as JSON and by `collector stats` from compressed ones), cell_stats (per-cell statistics and verdicts, filled
      by the collector), and views with DATETIME(6) times: campaigns_v, runs_v, results_v,
      series_v, cell_stats_v (made by services/common/store/views.py since 18: see there).
  12: worker_endpoints: each worker's last announcement (/metrics address, pool, up/down), so
      the collector's Prometheus service discovery survives a collector restart.
  14: results.build, build_version, server_sha256, malloc: which build ran a result.
  16: results' figure columns (services/common/results/figures.py): server_kind, the server's and
      the load processes' CPU seconds and context switches, disk bytes, status deltas (JSON),
      series_seconds; a full report reads these instead of decoding every whole result. NULL
      (series_seconds) in rows stored before: reports decode those rows' whole results, and
      `collector stats CAMPAIGN` fills the columns in.
  17: run_parts: the results of a run's parts (spec load_hosts) until every part of one group
      has arrived and the merge is stored, so a collector restart loses none (merged parts keep
      their row, emptied: the collector's user may not DELETE).
  18: schema_views: the fingerprint each view was made with. The views are no longer frozen at
      migration 11: after every migrate, services/common/store/views.py makes each missing view and
      again (CREATE OR REPLACE) each view whose definition or tables' columns changed, so
      results_v gains 14's columns. Migration 11 no longer makes them itself: on a new results DB
      views.py makes them current at once, which the collector (who may not replace a view) can.
  19: run_parts keyed by (run_id, part_group, part_index): a part of another group (a late,
      redelivered one) is a row of its own, never overwriting a kept part of the group in flight.
  20: results.p50_ms, p95_ms, p99_ms, max_ms NULL where no transaction completed (an empty
      histogram has no percentile); rows stored before with 0 transactions read NULL.
      results.starved_connections, in_flight_at_end, oldest_in_flight_s, completed_per_connection_min,
      completed_per_connection_median: a run's window (native driver), NULL where not recorded.
  21: results.server_transactions, server_count_reason: the server's own count of a run's window
      (RunResult.server.count), NULL with the reason where it is n/a; NULL both in rows stored
      before (`collector stats CAMPAIGN` fills them in from the whole results).
  22: runs.taker_user, taker_worker, taker_attempt: who took a run (the broker user and worker of
      its first claim, services/common/store/takers.py), so no other worker's messages speak for it;
      campaigns.publisher: the broker user that published the campaign's runs.
  23: cell_stats judged as the report judges (services/reporting/cell_stats.py): verdict VARCHAR(16)
      for the shared decisions (faster, slower, equivalent, undecided, differs, identical,
      missing); q_value, interval_low/interval_high at interval_level (Benjamini-Yekutieli, as
      the report's marks) and excluded_runs (stalled and short runs left out). Verdicts stored
      before came from a per-cell Welch test no report shows any more: they are cleared (with
      p_value, ratio_low, ratio_high and the mark, whose first character was that verdict's)
      until `collector stats CAMPAIGN` judges the campaign again.
  24: campaigns.submitter: the results-DB user that recorded the campaign (the user name of USER(),
      set by the procedure bf_record_campaign, store/procedures.py); only it or an operator may
      cancel the campaign. NULL for campaigns recorded before and imported ones: the operator's.
  25: change_points and gate_verdicts: what a spec's history found (store/judgements.py), for the
      history board.
  26: results.pool: the pool a run of a campaign on several pools ran on; NULL for one pool.
  27: cell_stats.pool, in its key: each pool's cell statistics of a campaign on several pools
      ('' for one pool), filled by the collector from then on (or `collector stats CAMPAIGN`).
  28: run_part_takers: who took each part of a run split over load hosts (store/takers.py), bound at
      the part's first claim and changed only by a takeover, so no other worker's part speaks for it.
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
    # 11: results readable from SQL. The epochs stay (every reader uses them); the views add
    # DATETIME(6) beside them, in the session's time zone (Grafana's MySQL source sets UTC).
    # A series row carries its result's stored_at: a redelivered result rewrites the seconds it
    # has, and series_v joins on stored_at, so seconds left from an older, longer result (the
    # collector may not DELETE) never show. Its views are made after the migrations by
    # services/common/store/views.py (CREATE VIEW for a missing one: the collector's user may create
    # views but drops nothing); made here, they would be frozen at these tables' columns and the
    # collector could not bring them up to date.
    (
        11,
        [
            """CREATE TABLE IF NOT EXISTS result_series (
                run_id VARCHAR(255) NOT NULL,
                second INT NOT NULL,
                campaign_id VARCHAR(128) NOT NULL,
                stored_at DOUBLE NOT NULL,
                transactions BIGINT NOT NULL,
                queries BIGINT NOT NULL,
                errors BIGINT NOT NULL,
                ignored_errors BIGINT NULL,
                reconnects BIGINT NULL,
                queue BIGINT NULL,
                PRIMARY KEY (run_id, second),
                KEY result_series_campaign (campaign_id)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """INSERT IGNORE INTO result_series (run_id, second, campaign_id, stored_at, transactions, queries, errors,
                                                ignored_errors, reconnects, queue)
               SELECT r.run_id, j.i - 1, r.campaign_id, r.stored_at,
                      COALESCE(JSON_VALUE(r.result_json, CONCAT('$.series.transactions[', j.i - 1, ']')), 0),
                      j.queries,
                      COALESCE(JSON_VALUE(r.result_json, CONCAT('$.series.errors[', j.i - 1, ']')), 0),
                      JSON_VALUE(r.result_json, CONCAT('$.series.ignored_errors[', j.i - 1, ']')),
                      JSON_VALUE(r.result_json, CONCAT('$.series.reconnects[', j.i - 1, ']')),
                      JSON_VALUE(r.result_json, CONCAT('$.series.queue[', j.i - 1, ']'))
               FROM results r,
                    JSON_TABLE(r.result_json, '$.series.queries[*]' COLUMNS (i FOR ORDINALITY, queries BIGINT PATH '$')) j
               WHERE r.result_json <> '' AND JSON_VALID(r.result_json)""",
            """CREATE TABLE IF NOT EXISTS cell_stats (
                campaign_id VARCHAR(128) NOT NULL,
                metric VARCHAR(64) NOT NULL,
                workload VARCHAR(64) NOT NULL,
                threads INT NOT NULL,
                target VARCHAR(64) NOT NULL,
                baseline VARCHAR(64) NOT NULL,
                higher_is_better TINYINT NOT NULL,
                n INT NOT NULL,
                failed INT NOT NULL,
                mean DOUBLE NULL,
                stdev DOUBLE NULL,
                cv DOUBLE NULL,
                ci_low DOUBLE NULL,
                ci_high DOUBLE NULL,
                ratio DOUBLE NULL,
                ratio_low DOUBLE NULL,
                ratio_high DOUBLE NULL,
                p_value DOUBLE NULL,
                verdict VARCHAR(8) NULL,
                mark VARCHAR(8) NOT NULL,
                high_cv TINYINT NOT NULL,
                collapsed TINYINT NOT NULL,
                collapse_ratio DOUBLE NULL,
                stalled_runs INT NOT NULL,
                alpha DOUBLE NOT NULL,
                min_effect DOUBLE NOT NULL,
                computed_at DOUBLE NOT NULL,
                PRIMARY KEY (campaign_id, metric, workload, threads, target)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ],
    ),
    # 12: the collector lists the fleet to Prometheus at once after a restart.
    (
        12,
        [
            """CREATE TABLE IF NOT EXISTS worker_endpoints (
                worker VARCHAR(128) NOT NULL PRIMARY KEY,
                pool VARCHAR(64) NOT NULL,
                address VARCHAR(255) NOT NULL,
                state VARCHAR(8) NOT NULL,
                announced_at DOUBLE NOT NULL
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
    # 16: a 10,000-run HTML, JSON or ODS report read and validated 10,000 whole results for a few
    # numbers each; those numbers are columns now (written by the store with every result).
    (
        16,
        [
            "ALTER TABLE results ADD COLUMN IF NOT EXISTS server_kind VARCHAR(8) NULL,"
            " ADD COLUMN IF NOT EXISTS server_cpu_s DOUBLE NULL,"
            " ADD COLUMN IF NOT EXISTS client_cpu_s DOUBLE NULL,"
            " ADD COLUMN IF NOT EXISTS server_ctxt_switches BIGINT NULL,"
            " ADD COLUMN IF NOT EXISTS client_ctxt_switches BIGINT NULL,"
            " ADD COLUMN IF NOT EXISTS disk_read_bytes BIGINT NULL,"
            " ADD COLUMN IF NOT EXISTS disk_write_bytes BIGINT NULL,"
            " ADD COLUMN IF NOT EXISTS status_deltas_json MEDIUMTEXT NULL,"
            " ADD COLUMN IF NOT EXISTS series_seconds INT NULL",
        ],
    ),
    # 17: parts wait here for the rest of their group (services/common/store/parts.py).
    (
        17,
        [
            """CREATE TABLE IF NOT EXISTS run_parts (
                run_id VARCHAR(255) NOT NULL,
                part_index INT NOT NULL,
                part_count INT NOT NULL,
                part_group VARCHAR(64) NOT NULL,
                status VARCHAR(16) NOT NULL,
                result_z LONGBLOB NOT NULL,
                stored_at DOUBLE NOT NULL,
                merged_at DOUBLE NULL,
                PRIMARY KEY (run_id, part_index)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ],
    ),
    # 18: views made again whenever their tables gain columns (services/common/store/views.py).
    (
        18,
        [
            """CREATE TABLE IF NOT EXISTS schema_views (
                name VARCHAR(64) NOT NULL PRIMARY KEY,
                fingerprint CHAR(64) NOT NULL,
                made_at DOUBLE NOT NULL
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ],
    ),
    # 19: a part's row is its group's (services/common/store/parts.py). ALTER only: the
    # collector's user has ALTER and INDEX, not DROP (deploy/ensure-services).
    (
        19,
        ["ALTER TABLE run_parts DROP PRIMARY KEY, ADD PRIMARY KEY (run_id, part_group, part_index)"],
    ),
    # 20: no latency is NULL, never 0 (services/common/messages/results.py Latency).
    (
        20,
        [
            "ALTER TABLE results MODIFY p50_ms DOUBLE NULL, MODIFY p95_ms DOUBLE NULL, MODIFY p99_ms DOUBLE NULL,"
            " MODIFY max_ms DOUBLE NULL",
            "UPDATE results SET p50_ms=NULL, p95_ms=NULL, p99_ms=NULL, max_ms=NULL WHERE transactions=0",
            "ALTER TABLE results ADD COLUMN IF NOT EXISTS starved_connections INT NULL,"
            " ADD COLUMN IF NOT EXISTS in_flight_at_end INT NULL,"
            " ADD COLUMN IF NOT EXISTS oldest_in_flight_s DOUBLE NULL,"
            " ADD COLUMN IF NOT EXISTS completed_per_connection_min INT NULL,"
            " ADD COLUMN IF NOT EXISTS completed_per_connection_median DOUBLE NULL",
        ],
    ),
    # 21: the report shows the client's and the server's counts of every run (services/reporting/counts.py).
    (
        21,
        [
            "ALTER TABLE results ADD COLUMN IF NOT EXISTS server_transactions BIGINT NULL,"
            " ADD COLUMN IF NOT EXISTS server_count_reason TEXT NULL",
        ],
    ),
    # 22: a run is bound to its taker (services/common/store/takers.py). Versions are a set, not a
    # sequence (connection.migrate applies each one missing).
    (
        22,
        [
            "ALTER TABLE runs ADD COLUMN IF NOT EXISTS taker_user VARCHAR(128) NULL,"
            " ADD COLUMN IF NOT EXISTS taker_worker VARCHAR(128) NULL,"
            " ADD COLUMN IF NOT EXISTS taker_attempt INT NULL",
            "ALTER TABLE campaigns ADD COLUMN IF NOT EXISTS publisher VARCHAR(128) NULL",
        ],
    ),
    # 23: one way to a verdict (services/reporting/verdicts.py); what the old test said is not kept.
    (
        23,
        [
            "ALTER TABLE cell_stats MODIFY verdict VARCHAR(16) NULL,"
            " ADD COLUMN IF NOT EXISTS q_value DOUBLE NULL,"
            " ADD COLUMN IF NOT EXISTS interval_low DOUBLE NULL,"
            " ADD COLUMN IF NOT EXISTS interval_high DOUBLE NULL,"
            " ADD COLUMN IF NOT EXISTS interval_level DOUBLE NULL,"
            " ADD COLUMN IF NOT EXISTS excluded_runs INT NOT NULL DEFAULT 0",
            # Old rows only (interval_level is set on every row judged since): run again, it clears nothing new.
            # The mark first: MariaDB assigns left to right, so it still reads the old verdict.
            "UPDATE cell_stats SET mark=IF(verdict IN ('faster', 'slower', 'n/a') AND mark <> '', SUBSTRING(mark, 2), mark),"
            " verdict=NULL, p_value=NULL, ratio_low=NULL, ratio_high=NULL"
            " WHERE interval_level IS NULL AND verdict IS NOT NULL",
        ],
    ),
    # 24: who submitted a campaign (store/procedures.py); no backfill: NULL is the operator's.
    (24, ["ALTER TABLE campaigns ADD COLUMN IF NOT EXISTS submitter VARCHAR(128) NULL"]),
    # 25: what a spec's history found, kept for the history board (services/common/store/judgements.py):
    # the change points the collector finds when a campaign of the spec ends (one row per change, its
    # size and significance updated as later campaigns sharpen it), and each gate's verdict.
    (
        25,
        [
            """CREATE TABLE IF NOT EXISTS change_points (
                spec_name VARCHAR(64) NOT NULL,
                campaign_id VARCHAR(128) NOT NULL,
                target VARCHAR(64) NOT NULL,
                workload VARCHAR(64) NOT NULL,
                threads INT NOT NULL,
                metric VARCHAR(32) NOT NULL,
                ratio DOUBLE NOT NULL,
                p_value DOUBLE NOT NULL,
                q_value DOUBLE NOT NULL,
                direction VARCHAR(16) NOT NULL,
                found_at DOUBLE NOT NULL,
                found_by VARCHAR(128) NOT NULL,
                PRIMARY KEY (spec_name, campaign_id, target, workload, threads, metric),
                KEY change_points_campaign (campaign_id)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """CREATE TABLE IF NOT EXISTS gate_verdicts (
                id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                campaign_id VARCHAR(128) NOT NULL,
                against_campaign VARCHAR(128) NULL,
                verdict VARCHAR(16) NOT NULL,
                beyond DOUBLE NOT NULL,
                slower_cells INT NOT NULL,
                judged_at DOUBLE NOT NULL,
                judged_by VARCHAR(128) NOT NULL,
                KEY gate_verdicts_campaign (campaign_id, judged_at)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ],
    ),
    # 26: the pool a run ran on, in a campaign on several pools (spec ``pools``; the run id's
    # @POOL suffix); NULL: the campaign's one pool, as every earlier result.
    (26, ["ALTER TABLE results ADD COLUMN IF NOT EXISTS pool VARCHAR(64) NULL"]),
    # 27: a campaign on several pools has each pool's cell statistics, judged as its pool's report
    # judges them; '' (not NULL: a key column) for the one pool of every other campaign.
    (27, ["ALTER TABLE cell_stats ADD COLUMN IF NOT EXISTS pool VARCHAR(64) NOT NULL DEFAULT '',"
          " DROP PRIMARY KEY, ADD PRIMARY KEY (campaign_id, metric, workload, threads, target, pool)"]),
    # 28: each part of a split run has its taker, as runs.taker_* for a whole run (store/takers.py).
    (
        28,
        [
            """CREATE TABLE IF NOT EXISTS run_part_takers (
                run_id VARCHAR(255) NOT NULL,
                part_index INT NOT NULL,
                taker_user VARCHAR(128) NOT NULL,
                taker_worker VARCHAR(128) NOT NULL,
                taker_attempt INT NOT NULL,
                claimed_at DOUBLE NOT NULL,
                PRIMARY KEY (run_id, part_index)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ],
    ),
]

LATEST = max(v for v, _ in MIGRATIONS)
