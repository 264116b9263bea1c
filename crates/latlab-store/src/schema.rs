//! The store's schema as an ordered list of migrations. A store's `PRAGMA user_version` is the
//! number of migrations applied to it; opening a store applies the missing ones in order, each in
//! its own transaction. Migrations are only ever appended: a released step never changes.

/// One step of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// What the step adds, for messages.
    pub name: &'static str,
    /// The SQL, run as one batch inside a transaction.
    pub sql: &'static str,
    /// Rows the step computes from what is stored, in the same transaction, after its SQL.
    pub fill: Option<fn(&rusqlite::Transaction<'_>) -> crate::Result<()>>,
}

/// Every migration, in order; the store's schema version is the number applied.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        name: "runs, experiments and cells",
        sql: MIGRATION_1,
        fill: None,
    },
    Migration {
        name: "monitoring series, windows and annotations",
        sql: MIGRATION_2,
        fill: None,
    },
    Migration {
        name: "spike stories",
        sql: MIGRATION_3,
        fill: None,
    },
    Migration {
        name: "monitoring totals and rollups",
        sql: MIGRATION_4,
        fill: Some(crate::totals::rebuild_all),
    },
    Migration {
        name: "load failures",
        sql: MIGRATION_5,
        fill: None,
    },
];

/// The schema version this build writes: the number of [`MIGRATIONS`].
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// `PRAGMA application_id` of a latlab store ("LtLb").
pub const APPLICATION_ID: i32 = 0x4c74_4c62;

// Conventions: nanoseconds (`_ns`) and unix times (`_unix_ns`) are INTEGER (u64 stored bit for bit
// as i64: every real value is below 2^63); JSON columns hold latlab-model types serialized with
// serde; histogram columns hold `Histogram::encode`. Columns also present inside a JSON column
// (`count`, `p99_ns`, …) are copies kept for queries; reading a run uses the JSON.
const MIGRATION_1: &str = r#"
-- System records, deduplicated by content: many runs on one machine share one row.
CREATE TABLE systems (
    id             INTEGER PRIMARY KEY,
    hash           TEXT NOT NULL,           -- FNV-1a 64 of `record`, an index only
    hostname       TEXT NOT NULL,
    kernel_release TEXT NOT NULL,
    preempt        TEXT NOT NULL,
    cpu_model      TEXT NOT NULL,
    record         TEXT NOT NULL            -- SystemInfo JSON
);
CREATE INDEX systems_hash ON systems(hash);

-- A plan run by `latlab run`.
CREATE TABLE experiments (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    plan        TEXT NOT NULL,              -- the plan text as given
    plan_hash   TEXT NOT NULL,              -- FNV-1a 64 of `plan`, to find it again for --resume
    started_at  TEXT NOT NULL,              -- RFC 3339 UTC
    ended_at    TEXT,
    status      TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted', 'failed'))
);
CREATE INDEX experiments_plan ON experiments(plan_hash);

-- One cell of an experiment's matrix and one repeat of it.
CREATE TABLE cells (
    id             INTEGER PRIMARY KEY,
    experiment_id  INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    cell_key       TEXT NOT NULL,           -- canonical key of the cell's parameters
    params         TEXT NOT NULL,           -- the parameters, JSON
    repeat         INTEGER NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('pending', 'done', 'skipped', 'failed')),
    reason         TEXT,                    -- why skipped or failed
    updated_at     TEXT NOT NULL,
    UNIQUE (experiment_id, cell_key, repeat)
);

-- One measurement (a RunResult). Its parts live in the tables below.
CREATE TABLE runs (
    id                 INTEGER PRIMARY KEY,
    uid                TEXT NOT NULL UNIQUE,  -- RunResult.id
    experiment_id      INTEGER REFERENCES experiments(id) ON DELETE SET NULL,
    cell_id            INTEGER REFERENCES cells(id) ON DELETE SET NULL,
    system_id          INTEGER NOT NULL REFERENCES systems(id),
    schema             TEXT NOT NULL,
    schema_version     INTEGER NOT NULL,
    latlab_version     TEXT NOT NULL,
    started_at         TEXT NOT NULL,
    ended_at           TEXT NOT NULL,
    start_unix_ns      INTEGER NOT NULL,
    elapsed_ns         INTEGER NOT NULL,
    method             TEXT NOT NULL,
    interval_ns        INTEGER NOT NULL,
    policy             TEXT NOT NULL,
    priority           INTEGER NOT NULL,
    cpus               TEXT,                  -- kernel list form; NULL for unpinned threads
    threads            INTEGER NOT NULL,
    stop_reason        TEXT NOT NULL,         -- duration, loops, signal, break
    count              INTEGER NOT NULL,      -- overall statistics (copies, for queries)
    missed             INTEGER NOT NULL,
    min_ns             INTEGER NOT NULL,
    p50_ns             INTEGER NOT NULL,
    p99_ns             INTEGER NOT NULL,
    p99_9_ns           INTEGER NOT NULL,
    max_ns             INTEGER NOT NULL,
    config             TEXT NOT NULL,         -- MeasureConfig JSON
    environment        TEXT NOT NULL,         -- RunEnvironment JSON
    stop               TEXT NOT NULL,         -- StopReason JSON
    overall_max_at_ns  INTEGER NOT NULL,
    overall_max_thread INTEGER NOT NULL,
    overall_stats      TEXT NOT NULL,         -- Stats JSON
    overall_corrected  TEXT NOT NULL,         -- Stats JSON
    overall_histogram  BLOB NOT NULL,
    spike_threshold_ns INTEGER,
    spikes_not_kept    INTEGER NOT NULL
);
CREATE INDEX runs_start ON runs(start_unix_ns);
CREATE INDEX runs_experiment ON runs(experiment_id);
CREATE INDEX runs_cell ON runs(cell_id);
CREATE INDEX runs_system ON runs(system_id);

-- One measuring thread of a run (one CPU when pinned).
CREATE TABLE threads (
    run_id              INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx                 INTEGER NOT NULL,     -- index in RunResult.threads
    label               TEXT NOT NULL,
    cpu                 INTEGER,
    tid                 INTEGER NOT NULL,
    missed              INTEGER NOT NULL,
    expected_periods    INTEGER,
    max_at_ns           INTEGER NOT NULL,
    cpu_time_ns         INTEGER,
    count               INTEGER NOT NULL,
    min_ns              INTEGER NOT NULL,
    p99_ns              INTEGER NOT NULL,
    p99_9_ns            INTEGER NOT NULL,
    max_ns              INTEGER NOT NULL,
    stats               TEXT NOT NULL,        -- Stats JSON
    corrected_stats     TEXT NOT NULL,        -- Stats JSON
    histogram           BLOB NOT NULL,
    corrected_histogram BLOB NOT NULL,
    PRIMARY KEY (run_id, idx)
);

-- The time series of a thread: one row per closed window.
CREATE TABLE windows (
    run_id        INTEGER NOT NULL,
    thread_idx    INTEGER NOT NULL,
    seq           INTEGER NOT NULL,           -- position in ThreadResult.windows
    window_index  INTEGER NOT NULL,
    start_ns      INTEGER NOT NULL,
    count         INTEGER NOT NULL,
    min_ns        INTEGER NOT NULL,
    max_ns        INTEGER NOT NULL,
    p99_ns        INTEGER NOT NULL,
    missed        INTEGER NOT NULL,
    PRIMARY KEY (run_id, thread_idx, seq),
    FOREIGN KEY (run_id, thread_idx) REFERENCES threads(run_id, idx) ON DELETE CASCADE
) WITHOUT ROWID;

-- Samples above the spike threshold.
CREATE TABLE spikes (
    run_id      INTEGER NOT NULL,
    seq         INTEGER NOT NULL,             -- position in Spikes.kept
    thread_idx  INTEGER NOT NULL,
    cpu         INTEGER,
    at_ns       INTEGER NOT NULL,
    value_ns    INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq),
    FOREIGN KEY (run_id, thread_idx) REFERENCES threads(run_id, idx) ON DELETE CASCADE
) WITHOUT ROWID;

-- What the samplers saw (idle states, frequency, power, interrupts, temperatures), per run.
CREATE TABLE samples (
    run_id     INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    period_ns  INTEGER NOT NULL,
    periods    INTEGER NOT NULL,              -- length of the series
    data       TEXT NOT NULL                  -- Samples JSON (summary and series)
);

-- Loads that ran during a run, and the work they counted.
CREATE TABLE load_reports (
    run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,             -- position in Loads.reports
    spec        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    cpus        TEXT,                         -- JSON list, NULL for all online CPUs
    workers     INTEGER NOT NULL,
    started_ns  INTEGER NOT NULL,
    elapsed_ns  INTEGER NOT NULL,
    warnings    TEXT NOT NULL,                -- JSON list
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE load_throughput (
    run_id      INTEGER NOT NULL,
    report_seq  INTEGER NOT NULL,
    seq         INTEGER NOT NULL,             -- position in LoadReport.throughput
    what        TEXT NOT NULL,
    unit        TEXT NOT NULL,
    rate        REAL,                         -- NULL stands for NaN
    total       REAL,
    PRIMARY KEY (run_id, report_seq, seq),
    FOREIGN KEY (run_id, report_seq) REFERENCES load_reports(run_id, seq) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE TABLE load_phases (
    run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,            -- position in Loads.phases
    phase_index  INTEGER NOT NULL,
    spec         TEXT NOT NULL,
    start_ns     INTEGER NOT NULL,
    end_ns       INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- Kernel latencies traced beside a run (`latlab measure --trace`): one row per traced family
-- (name = family name, data = its FamilyResult) and one row named `run` holding the rest of the
-- TraceResult (events, CPUs, skipped events, cost, warnings) with no families.
CREATE TABLE trace_results (
    run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    data       TEXT NOT NULL,                 -- JSON, format defined by the trace model
    histogram  BLOB,                          -- its latency histogram, when it has one
    PRIMARY KEY (run_id, name)
);
"#;

const MIGRATION_2: &str = r#"
-- A continuous watch by `latlab monitor`; a restarted daemon continues its series by name.
CREATE TABLE monitor_series (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    system_id    INTEGER REFERENCES systems(id),
    window_ns    INTEGER NOT NULL,
    config       TEXT NOT NULL,               -- measuring configuration, JSON
    idle_states  TEXT NOT NULL,               -- [CpuIdleStates] JSON: names of residency columns
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

-- One closed window over all CPUs (written in one transaction with its per-CPU rows), or after
-- retention one hour of them merged.
CREATE TABLE monitor_sets (
    series_id          INTEGER NOT NULL REFERENCES monitor_series(id) ON DELETE CASCADE,
    start_unix_ns      INTEGER NOT NULL,
    end_unix_ns        INTEGER NOT NULL,
    window_index       INTEGER NOT NULL,      -- first window index it holds
    last_window_index  INTEGER NOT NULL,
    windows            INTEGER NOT NULL,      -- windows merged into it (1: as measured)
    covered_ns         INTEGER NOT NULL,      -- time its windows cover (gaps excluded)
    power              TEXT,                  -- [PowerSource] JSON
    thermal            TEXT,                  -- [ThermalSummary] JSON
    cost_cpu_time_ns   INTEGER,               -- CPU time latlab itself used
    PRIMARY KEY (series_id, start_unix_ns),
    CHECK (end_unix_ns > start_unix_ns)
);
CREATE INDEX monitor_sets_end ON monitor_sets(series_id, end_unix_ns);

-- Per CPU of a set: the window's histogram and statistics derived from it.
CREATE TABLE monitor_windows (
    series_id      INTEGER NOT NULL,
    start_unix_ns  INTEGER NOT NULL,
    cpu            INTEGER NOT NULL,
    count          INTEGER NOT NULL,
    min_ns         INTEGER NOT NULL,
    max_ns         INTEGER NOT NULL,
    p99_ns         INTEGER NOT NULL,
    p99_9_ns       INTEGER NOT NULL,
    missed         INTEGER NOT NULL,
    histogram      BLOB NOT NULL,
    cpu_summary    TEXT,                      -- sampler CpuSummary JSON
    PRIMARY KEY (series_id, start_unix_ns, cpu),
    FOREIGN KEY (series_id, start_unix_ns)
        REFERENCES monitor_sets(series_id, start_unix_ns) ON DELETE CASCADE
);
CREATE INDEX monitor_windows_cpu ON monitor_windows(series_id, cpu, start_unix_ns);
CREATE INDEX monitor_windows_worst ON monitor_windows(series_id, max_ns);

-- Samples above the spike threshold in a window (kept, and moved along, when windows merge).
CREATE TABLE monitor_spikes (
    id             INTEGER PRIMARY KEY,
    series_id      INTEGER NOT NULL,
    start_unix_ns  INTEGER NOT NULL,
    cpu            INTEGER NOT NULL,
    at_unix_ns     INTEGER NOT NULL,
    value_ns       INTEGER NOT NULL,
    FOREIGN KEY (series_id, start_unix_ns, cpu)
        REFERENCES monitor_windows(series_id, start_unix_ns, cpu) ON DELETE CASCADE
);
CREATE INDEX monitor_spikes_window ON monitor_spikes(series_id, start_unix_ns, cpu);

-- Profile and schedule switches, daemon starts and stops, notes.
CREATE TABLE monitor_annotations (
    id          INTEGER PRIMARY KEY,
    series_id   INTEGER NOT NULL REFERENCES monitor_series(id) ON DELETE CASCADE,
    at_unix_ns  INTEGER NOT NULL,
    cpu         INTEGER,
    kind        TEXT NOT NULL,
    text        TEXT NOT NULL
);
CREATE INDEX monitor_annotations_time ON monitor_annotations(series_id, at_unix_ns);
"#;

const MIGRATION_3: &str = r#"
-- What the kernel did on the CPU during a spike (`latlab measure --trace --spike`): SpikeStory
-- JSON, NULL when the run was not traced or the story could not be read.
ALTER TABLE spikes ADD COLUMN story TEXT;
"#;

const MIGRATION_4: &str = r#"
-- What each monitoring series has measured since it began, kept in the transaction that stores
-- each window set (so /metrics reads these rows instead of every window). Retention merges leave
-- them as they are. Filled from the stored windows when a store gains this table.
CREATE TABLE monitor_totals (
    series_id             INTEGER PRIMARY KEY REFERENCES monitor_series(id) ON DELETE CASCADE,
    sets                  INTEGER NOT NULL,   -- window sets added: a reader's cursor
    windows               INTEGER NOT NULL,
    cost_cpu_time_ns      INTEGER NOT NULL,
    power_j               TEXT NOT NULL,      -- {source: joules} JSON
    first_start_unix_ns   INTEGER,
    last_end_unix_ns      INTEGER,
    last_window_index     INTEGER,
    newest_start_unix_ns  INTEGER
);

CREATE TABLE monitor_cpu_totals (
    series_id    INTEGER NOT NULL REFERENCES monitor_series(id) ON DELETE CASCADE,
    cpu          INTEGER NOT NULL,
    missed       INTEGER NOT NULL,
    histogram    BLOB NOT NULL,               -- every window's histogram merged
    idle_time_s  TEXT NOT NULL,               -- seconds per idle state, JSON
    idle_usage   TEXT NOT NULL,               -- entries per idle state, JSON
    PRIMARY KEY (series_id, cpu)
);

-- Per CPU and UTC hour or day (span_ns), the windows starting in it summarized for timelines
-- over long ranges; kept with every window set, left as they are by retention merges.
CREATE TABLE monitor_rollups (
    series_id          INTEGER NOT NULL REFERENCES monitor_series(id) ON DELETE CASCADE,
    span_ns            INTEGER NOT NULL,
    start_unix_ns      INTEGER NOT NULL,
    cpu                INTEGER NOT NULL,
    windows            INTEGER NOT NULL,
    count              INTEGER NOT NULL,
    missed             INTEGER NOT NULL,
    max_ns             INTEGER NOT NULL,
    max_start_unix_ns  INTEGER NOT NULL,      -- the window holding the maximum
    p99_ns             INTEGER NOT NULL,      -- the highest of its windows'
    p99_9_ns           INTEGER NOT NULL,
    summary            TEXT NOT NULL,         -- time-weighted sums of sampler averages, JSON
    PRIMARY KEY (series_id, span_ns, start_unix_ns, cpu)
);

-- The resolution a window's histogram is kept at: 0 as measured, else the shift it was coarsened
-- with as it aged (`Histogram::coarsen`).
ALTER TABLE monitor_windows ADD COLUMN coarse_shift INTEGER NOT NULL DEFAULT 0;
-- The windows still at full resolution (the newest ones), for the ageing pass.
CREATE INDEX monitor_windows_fine ON monitor_windows(series_id, start_unix_ns)
    WHERE coarse_shift = 0;
"#;

const MIGRATION_5: &str = r#"
-- Why a load failed (a command that exited with an error on its own: the run measured without it
-- from then on), NULL where it did not. Runs stored before this step did not keep it.
ALTER TABLE load_reports ADD COLUMN failed TEXT;
"#;
