//! Evolves a kernel from a spec file through the C API, from Rust: the parameter search, stop rules (one
//! of them a closure of the host's), a progress closure; then the best kernel, its lineage and the JSON
//! report.
//!
//!     evolve_rust SPEC [MAX_EVALS]        e.g. evolve_rust problems/level1/row_sum/cpu.json 24
use kernelevolve::{sys, version, Evolver, EvolverOptions, Mutator, Spec, StopRule};
use std::process::exit;
use std::time::{Duration, Instant};

fn evolve(path: &str, max_evals: i64) -> kernelevolve::Result<f64> {
    let (major, minor, patch) = version()?;
    eprintln!("KernelEvolve {}.{}.{} from Rust", major, minor, patch);

    let spec = Spec::load(path)?;
    let mut evolver = Evolver::new(
        &spec,
        &EvolverOptions {
            seed: 7,
            ..Default::default()
        },
    )?;
    let mutator = Mutator::param(None)?;
    evolver.set_mutator(&mutator)?;
    // The host's own rule, a deadline: when it fires the run ends normally, not as an abort.
    let deadline = Instant::now() + Duration::from_secs(600);
    let stop = StopRule::any(&[
        &StopRule::max_evaluations(max_evals)?,
        &StopRule::plateau(40)?,
        &StopRule::callback("deadline", move |_| Instant::now() >= deadline)?,
    ])?;
    evolver.set_stop_rule(&stop)?;
    let mut best_so_far = 0.0;
    evolver.on_progress(move |progress| {
        if let Some(node) = &progress.node {
            let speedup = node.speedup().unwrap_or(0.0);
            if speedup > best_so_far {
                best_so_far = speedup;
                eprintln!(
                    "node {}: {:.2}x after {} evaluations ({})",
                    node.id().unwrap_or(-1),
                    speedup,
                    progress.evaluations,
                    node.note().unwrap_or_default()
                );
            }
        }
        true // go on
    })?;

    let result = evolver.run()?;
    eprint!("{}", result.report_text()?);
    let best = result.best()?;
    let tunables: Vec<String> = best
        .tunables()?
        .iter()
        .map(|(k, v)| format!("{}={}", k, v))
        .collect();
    println!(
        "best speedup {:.2}x with {}",
        best.speedup()?,
        tunables.join(" ")
    );
    println!("times (us): {:?}", best.times_us()?);
    println!("lineage: {:?}", result.lineage(best.id()?)?);
    println!("{}", result.report_json()?);
    best.speedup()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: evolve_rust SPEC [MAX_EVALS]");
        exit(2);
    }
    let max_evals = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(24);
    match evolve(&args[1], max_evals) {
        Ok(speedup) => exit(if speedup >= 1.0 { 0 } else { 1 }),
        Err(e) => {
            eprintln!("evolve_rust: {}", e.message);
            exit(
                if e.status == sys::KE_ERROR_BAD_SPEC || e.status == sys::KE_ERROR_INVALID_ARGUMENT
                {
                    2
                } else {
                    1
                },
            );
        }
    }
}
