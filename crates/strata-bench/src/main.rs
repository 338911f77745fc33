//! `strata-bench`: db_bench-compatible benchmarks for StrataKV.
//!
//! ```text
//! strata-bench --benchmarks=fillrandom,readrandom --num=1000000 --compression_type=none \
//!     --bloom_bits=10 --cache_size=1073741824 --histogram=1 --seed=42 --profile=matrix --json out.json
//! ```

use std::process::ExitCode;

use strata_bench::flags::Flags;
use strata_bench::runner::Runner;

fn run() -> anyhow::Result<()> {
    let flags = Flags::try_parse_from_env()?;
    let mut runner = Runner::new(flags, Box::new(std::io::stdout()))?;
    runner.run_all()
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // clap's own messages (help, version, usage errors) print as clap formats them.
            if let Some(ce) = e.downcast_ref::<clap::Error>() {
                let _ = ce.print();
                return if ce.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
            }
            eprintln!("strata-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
