//! KernelEvolve from Rust: a safe layer over the C API's hand-written bindings ([`sys`]).
//!
//! Handles are owned values that free themselves on drop; borrowed views ([`Node`]) cannot outlive the
//! result or the callback they come from; every fallible call returns [`Result`], whose [`Error`]
//! carries the C status and the library's message. Callbacks are closures; a panic in one aborts the
//! run (in a stop rule's, stops it) instead of unwinding into C.
pub mod sys;

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// A failed call: the C status and the calling thread's `ke_last_error()`.
#[derive(Debug, Clone)]
pub struct Error {
    pub status: sys::ke_status,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (status {})", self.message, self.status)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn check(status: sys::ke_status) -> Result<()> {
    if status == sys::KE_OK {
        return Ok(());
    }
    // SAFETY: ke_last_error never returns NULL and its text lives until this thread's next failure.
    let message = unsafe { string(sys::ke_last_error()) };
    Err(Error { status, message })
}

fn cstring(text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error {
        status: sys::KE_ERROR_INVALID_ARGUMENT,
        message: format!("{:?} contains a NUL byte", text),
    })
}

/// Copies a borrowed C string ("" for NULL).
unsafe fn string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// The library's version (major, minor, patch).
pub fn version() -> Result<(i32, i32, i32)> {
    let (mut major, mut minor, mut patch) = (0, 0, 0);
    check(unsafe { sys::ke_version(&mut major, &mut minor, &mut patch) })?;
    Ok((major, minor, patch))
}

/// The problem: loaded from a spec file, or parsed from spec JSON.
pub struct Spec {
    raw: *mut sys::ke_spec,
}

impl Spec {
    pub fn load(path: &str) -> Result<Spec> {
        let path = cstring(path)?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ke_spec_load(&mut raw, path.as_ptr()) })?;
        Ok(Spec { raw })
    }

    pub fn parse(json: &str, path: Option<&str>) -> Result<Spec> {
        let json = cstring(json)?;
        let path = path.map(cstring).transpose()?;
        let mut raw = ptr::null_mut();
        check(unsafe {
            sys::ke_spec_parse(
                &mut raw,
                json.as_ptr(),
                path.as_ref().map_or(ptr::null(), |p| p.as_ptr()),
            )
        })?;
        Ok(Spec { raw })
    }

    pub fn name(&self) -> Result<String> {
        let mut out = ptr::null();
        check(unsafe { sys::ke_spec_name(&mut out, self.raw) })?;
        Ok(unsafe { string(out) })
    }

    pub fn to_json(&self) -> Result<String> {
        let mut out = ptr::null();
        check(unsafe { sys::ke_spec_to_json(&mut out, self.raw) })?;
        Ok(unsafe { string(out) })
    }
}

impl Drop for Spec {
    fn drop(&mut self) {
        unsafe { sys::ke_spec_destroy(self.raw) };
    }
}

/// What a stop rule sees: the search so far.
#[derive(Debug, Clone, Copy)]
pub struct SearchState {
    pub evaluations: i64,
    pub elapsed_s: f64,
    pub best_speedup: f64,
    pub evaluations_since_improvement: i64,
    pub tokens: i64,
}

type StopCallback = Box<dyn FnMut(&SearchState) -> bool + Send>;

unsafe extern "C" fn stop_trampoline(
    state: *const sys::ke_search_state,
    user_data: *mut c_void,
) -> c_int {
    let callback = &mut *(user_data as *mut StopCallback);
    let s = &*state;
    let state = SearchState {
        evaluations: s.evaluations,
        elapsed_s: s.elapsed_s,
        best_speedup: s.best_speedup,
        evaluations_since_improvement: s.evaluations_since_improvement,
        tokens: s.tokens,
    };
    match catch_unwind(AssertUnwindSafe(|| callback(&state))) {
        Ok(false) => 0,
        _ => 1, // stop; a panic stops the run too, rather than unwinding into C
    }
}

unsafe extern "C" fn stop_free(user_data: *mut c_void) {
    drop(Box::from_raw(user_data as *mut StopCallback));
}

/// When a search stops. Composites and evolvers keep what they need: the parts may be dropped after.
pub struct StopRule {
    raw: *mut sys::ke_stop_rule,
}

impl StopRule {
    fn make(f: impl FnOnce(*mut *mut sys::ke_stop_rule) -> sys::ke_status) -> Result<StopRule> {
        let mut raw = ptr::null_mut();
        check(f(&mut raw))?;
        Ok(StopRule { raw })
    }
    pub fn max_evaluations(n: i64) -> Result<StopRule> {
        Self::make(|out| unsafe { sys::ke_stop_rule_max_evaluations(out, n) })
    }
    pub fn max_time(seconds: f64) -> Result<StopRule> {
        Self::make(|out| unsafe { sys::ke_stop_rule_max_time(out, seconds) })
    }
    pub fn target_speedup(speedup: f64) -> Result<StopRule> {
        Self::make(|out| unsafe { sys::ke_stop_rule_target_speedup(out, speedup) })
    }
    pub fn plateau(evaluations: i64) -> Result<StopRule> {
        Self::make(|out| unsafe { sys::ke_stop_rule_plateau(out, evaluations) })
    }
    pub fn max_tokens(tokens: i64) -> Result<StopRule> {
        Self::make(|out| unsafe { sys::ke_stop_rule_max_tokens(out, tokens) })
    }
    /// The host's own rule: once `should_stop` returns true the run ends normally (not aborted), with a
    /// stop reason that names the rule. The library owns the closure from here on and drops it with the
    /// rule, once this value and every evolver or composite holding the rule are gone. Its calls never
    /// overlap, but come from whichever thread runs an evolver: hence `Send`.
    pub fn callback(
        name: &str,
        should_stop: impl FnMut(&SearchState) -> bool + Send + 'static,
    ) -> Result<StopRule> {
        let name = cstring(name)?;
        let boxed: Box<StopCallback> = Box::new(Box::new(should_stop));
        let user_data = Box::into_raw(boxed) as *mut c_void;
        let made = Self::make(|out| unsafe {
            sys::ke_stop_rule_callback(
                out,
                name.as_ptr(),
                Some(stop_trampoline),
                user_data,
                Some(stop_free),
            )
        });
        if made.is_err() {
            unsafe { stop_free(user_data) }; // a failed call leaves the closure to the caller
        }
        made
    }
    pub fn any(rules: &[&StopRule]) -> Result<StopRule> {
        let raw: Vec<*const sys::ke_stop_rule> = rules.iter().map(|r| r.raw as *const _).collect();
        Self::make(|out| unsafe { sys::ke_stop_rule_any(out, raw.as_ptr(), raw.len()) })
    }
    pub fn all(rules: &[&StopRule]) -> Result<StopRule> {
        let raw: Vec<*const sys::ke_stop_rule> = rules.iter().map(|r| r.raw as *const _).collect();
        Self::make(|out| unsafe { sys::ke_stop_rule_all(out, raw.as_ptr(), raw.len()) })
    }
}

impl Drop for StopRule {
    fn drop(&mut self) {
        unsafe { sys::ke_stop_rule_destroy(self.raw) };
    }
}

/// Makes children: the parameter search, or an external command.
pub struct Mutator {
    raw: *mut sys::ke_mutator,
}

impl Mutator {
    pub fn param(restart_probability: Option<f64>) -> Result<Mutator> {
        let mut options = sys::ke_param_mutator_options {
            version: 0,
            restart_probability: 0.0,
        };
        check(unsafe {
            sys::ke_param_mutator_options_init(&mut options, sys::KE_PARAM_MUTATOR_OPTIONS_VERSION)
        })?;
        if let Some(p) = restart_probability {
            options.restart_probability = p;
        }
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ke_mutator_param_create(&mut raw, &options) })?;
        Ok(Mutator { raw })
    }

    pub fn command(command: &str, timeout_s: f64) -> Result<Mutator> {
        let command = cstring(command)?;
        let options = sys::ke_command_mutator_options {
            version: sys::KE_COMMAND_MUTATOR_OPTIONS_VERSION,
            command: command.as_ptr(),
            timeout_s,
        };
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ke_mutator_command_create(&mut raw, &options) })?;
        Ok(Mutator { raw })
    }
}

impl Drop for Mutator {
    fn drop(&mut self) {
        unsafe { sys::ke_mutator_destroy(self.raw) };
    }
}

/// How candidates are evaluated. `Default` is the C API's: the CPU, worker processes, one at a time.
#[derive(Debug, Clone)]
pub struct EvolverOptions {
    pub device: String,
    pub seed: u64,
    pub jobs: i32,
    pub in_process: bool,
    pub timeout_s: f64,
}

impl Default for EvolverOptions {
    fn default() -> Self {
        EvolverOptions {
            device: "cpu".to_string(),
            seed: 1,
            jobs: 1,
            in_process: false,
            timeout_s: 0.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressEvent {
    Start,
    Node,
    MutatorFailure,
    Finish,
}

/// What a progress callback sees.
pub struct Progress<'a> {
    pub event: ProgressEvent,
    pub node: Option<Node<'a>>,
    pub evaluations: i64,
    pub elapsed_s: f64,
    pub best_speedup: f64,
    pub message: String,
}

type ProgressCallback<'a> = Box<dyn FnMut(&Progress) -> bool + 'a>;

unsafe extern "C" fn progress_trampoline(
    p: *const sys::ke_progress,
    user_data: *mut c_void,
) -> c_int {
    let callback = &mut *(user_data as *mut ProgressCallback);
    let p = &*p;
    let progress = Progress {
        event: match p.event {
            sys::KE_PROGRESS_START => ProgressEvent::Start,
            sys::KE_PROGRESS_NODE => ProgressEvent::Node,
            sys::KE_PROGRESS_MUTATOR_FAILURE => ProgressEvent::MutatorFailure,
            _ => ProgressEvent::Finish,
        },
        node: if p.node.is_null() {
            None
        } else {
            Some(Node {
                raw: p.node,
                _owner: PhantomData,
            })
        },
        evaluations: p.evaluations,
        elapsed_s: p.elapsed_s,
        best_speedup: p.best_speedup,
        message: string(p.message),
    };
    match catch_unwind(AssertUnwindSafe(|| callback(&progress))) {
        Ok(true) => 0,
        Ok(false) => 1, // the closure asked to stop
        Err(_) => 2,    // it panicked: abort the run rather than unwind into C
    }
}

/// Composes the parts and runs the search.
pub struct Evolver<'a> {
    raw: *mut sys::ke_evolver,
    progress: Option<Box<ProgressCallback<'a>>>,
}

impl<'a> Evolver<'a> {
    pub fn new(spec: &Spec, options: &EvolverOptions) -> Result<Evolver<'a>> {
        let device = cstring(&options.device)?;
        let mut o = std::mem::MaybeUninit::<sys::ke_evolver_options>::uninit();
        check(unsafe {
            sys::ke_evolver_options_init(o.as_mut_ptr(), sys::KE_EVOLVER_OPTIONS_VERSION)
        })?;
        let mut o = unsafe { o.assume_init() };
        o.device = device.as_ptr();
        o.seed = options.seed;
        o.jobs = options.jobs;
        o.in_process = options.in_process as c_int;
        o.timeout_s = options.timeout_s;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ke_evolver_create(&mut raw, spec.raw, &o) })?;
        Ok(Evolver {
            raw,
            progress: None,
        })
    }

    pub fn set_mutator(&mut self, mutator: &Mutator) -> Result<()> {
        check(unsafe { sys::ke_evolver_set_mutator(self.raw, mutator.raw) })
    }

    pub fn set_stop_rule(&mut self, rule: &StopRule) -> Result<()> {
        check(unsafe { sys::ke_evolver_set_stop_rule(self.raw, rule.raw) })
    }

    pub fn set_policy(&mut self, name: &str) -> Result<()> {
        let name = cstring(name)?;
        check(unsafe {
            sys::ke_evolver_set_policy(self.raw, name.as_ptr(), ptr::null(), ptr::null(), 0)
        })
    }

    /// Called on the running thread after each event; returning false aborts the run.
    pub fn on_progress(&mut self, callback: impl FnMut(&Progress) -> bool + 'a) -> Result<()> {
        let mut boxed: Box<ProgressCallback<'a>> = Box::new(Box::new(callback));
        let user_data = &mut *boxed as *mut ProgressCallback<'a> as *mut c_void;
        check(unsafe {
            sys::ke_evolver_set_progress(self.raw, Some(progress_trampoline), user_data)
        })?;
        self.progress = Some(boxed); // kept alive as long as the evolver may call it
        Ok(())
    }

    pub fn run(&mut self) -> Result<RunResult> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ke_evolver_run(&mut raw, self.raw) })?;
        Ok(RunResult { raw })
    }

    /// The seed and the reference only, as `kernelevolve check` does.
    pub fn check(&mut self) -> Result<RunResult> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ke_evolver_check(&mut raw, self.raw) })?;
        Ok(RunResult { raw })
    }

    /// What the last run found, even an aborted one.
    pub fn last_result(&self) -> Result<RunResult> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ke_evolver_result(&mut raw, self.raw) })?;
        Ok(RunResult { raw })
    }
}

impl<'a> Drop for Evolver<'a> {
    fn drop(&mut self) {
        unsafe { sys::ke_evolver_destroy(self.raw) };
    }
}

/// What a run found.
pub struct RunResult {
    raw: *mut sys::ke_result,
}

impl RunResult {
    fn node_from(
        &self,
        f: impl FnOnce(*mut *const sys::ke_node) -> sys::ke_status,
    ) -> Result<Node<'_>> {
        let mut raw = ptr::null();
        check(f(&mut raw))?;
        Ok(Node {
            raw,
            _owner: PhantomData,
        })
    }
    pub fn best(&self) -> Result<Node<'_>> {
        self.node_from(|out| unsafe { sys::ke_result_best(out, self.raw) })
    }
    pub fn seed(&self) -> Result<Node<'_>> {
        self.node_from(|out| unsafe { sys::ke_result_seed(out, self.raw) })
    }
    pub fn node(&self, id: i64) -> Result<Node<'_>> {
        self.node_from(|out| unsafe { sys::ke_result_node(out, self.raw, id) })
    }
    pub fn node_count(&self) -> Result<usize> {
        let mut n = 0;
        check(unsafe { sys::ke_result_node_count(&mut n, self.raw) })?;
        Ok(n)
    }
    /// Node ids from the seed to `id`, both included.
    pub fn lineage(&self, id: i64) -> Result<Vec<i64>> {
        let (mut ids, mut count) = (ptr::null(), 0usize);
        check(unsafe { sys::ke_result_lineage(&mut ids, &mut count, self.raw, id) })?;
        Ok(unsafe { std::slice::from_raw_parts(ids, count) }.to_vec())
    }
    pub fn evaluations(&self) -> Result<i64> {
        let mut n = 0;
        check(unsafe { sys::ke_result_evaluations(&mut n, self.raw) })?;
        Ok(n)
    }
    pub fn stop_reason(&self) -> Result<String> {
        let mut out = ptr::null();
        check(unsafe { sys::ke_result_stop_reason(&mut out, self.raw) })?;
        Ok(unsafe { string(out) })
    }
    pub fn report_json(&self) -> Result<String> {
        let mut out = ptr::null();
        check(unsafe { sys::ke_result_report_json(&mut out, self.raw) })?;
        Ok(unsafe { string(out) })
    }
    pub fn report_text(&self) -> Result<String> {
        let mut out = ptr::null();
        check(unsafe { sys::ke_result_report_text(&mut out, self.raw) })?;
        Ok(unsafe { string(out) })
    }
}

impl Drop for RunResult {
    fn drop(&mut self) {
        unsafe { sys::ke_result_destroy(self.raw) };
    }
}

/// A kernel variant, borrowed from a result or a callback.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    raw: *const sys::ke_node,
    _owner: PhantomData<&'a ()>,
}

impl<'a> Node<'a> {
    fn text(
        &self,
        f: unsafe extern "C" fn(*mut *const c_char, *const sys::ke_node) -> sys::ke_status,
    ) -> Result<String> {
        let mut out = ptr::null();
        check(unsafe { f(&mut out, self.raw) })?;
        Ok(unsafe { string(out) })
    }
    pub fn id(&self) -> Result<i64> {
        let mut id = 0;
        check(unsafe { sys::ke_node_id(&mut id, self.raw) })?;
        Ok(id)
    }
    /// "ok", "compile_error", "incorrect", "crashed", "timeout", "invalid" or "pending".
    pub fn status(&self) -> Result<String> {
        let mut status = 0;
        check(unsafe { sys::ke_node_status(&mut status, self.raw) })?;
        let mut name = ptr::null();
        check(unsafe { sys::ke_eval_status_name(&mut name, status) })?;
        Ok(unsafe { string(name) })
    }
    pub fn speedup(&self) -> Result<f64> {
        let mut s = 0.0;
        check(unsafe { sys::ke_node_speedup(&mut s, self.raw) })?;
        Ok(s)
    }
    pub fn source(&self) -> Result<String> {
        self.text(sys::ke_node_source)
    }
    pub fn note(&self) -> Result<String> {
        self.text(sys::ke_node_note)
    }
    pub fn mutator(&self) -> Result<String> {
        self.text(sys::ke_node_mutator)
    }
    pub fn message(&self) -> Result<String> {
        self.text(sys::ke_node_message)
    }
    pub fn tunables(&self) -> Result<Vec<(String, i64)>> {
        let mut n = 0;
        check(unsafe { sys::ke_node_tunable_count(&mut n, self.raw) })?;
        (0..n)
            .map(|i| {
                let (mut name, mut value) = (ptr::null(), 0i64);
                check(unsafe { sys::ke_node_tunable(&mut name, &mut value, self.raw, i) })?;
                Ok((unsafe { string(name) }, value))
            })
            .collect()
    }
    /// The median time per workload, in microseconds (empty unless ok).
    pub fn times_us(&self) -> Result<Vec<f64>> {
        let mut n = 0;
        check(unsafe { sys::ke_node_timing_count(&mut n, self.raw) })?;
        (0..n)
            .map(|w| {
                let mut t = sys::ke_timing {
                    version: sys::KE_TIMING_VERSION,
                    ..Default::default()
                };
                check(unsafe { sys::ke_node_timing(&mut t, self.raw, w) })?;
                Ok(t.median_us)
            })
            .collect()
    }
}
