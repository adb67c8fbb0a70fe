//! Raw bindings to capi/kernelevolve.h, written by hand (no bindgen): the same names, types and order.
//! C enums are `c_int` here; callbacks are `Option<extern "C" fn>` so that NULL is `None`.
#![allow(non_camel_case_types)]
#![allow(dead_code)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

pub const KE_VERSION_MAJOR: c_int = 0;
pub const KE_VERSION_MINOR: c_int = 1;
pub const KE_VERSION_PATCH: c_int = 0;

pub type ke_status = c_int;
pub const KE_OK: ke_status = 0;
pub const KE_ERROR_INVALID_ARGUMENT: ke_status = 1;
pub const KE_ERROR_BAD_SPEC: ke_status = 2;
pub const KE_ERROR_DEVICE_UNAVAILABLE: ke_status = 3;
pub const KE_ERROR_NOT_FOUND: ke_status = 4;
pub const KE_ERROR_ABORTED: ke_status = 5;
pub const KE_ERROR_OUT_OF_MEMORY: ke_status = 6;
pub const KE_ERROR_INTERNAL: ke_status = 7;

pub type ke_eval_status = c_int;
pub const KE_EVAL_PENDING: ke_eval_status = 0;
pub const KE_EVAL_OK: ke_eval_status = 1;
pub const KE_EVAL_COMPILE_ERROR: ke_eval_status = 2;
pub const KE_EVAL_INCORRECT: ke_eval_status = 3;
pub const KE_EVAL_CRASHED: ke_eval_status = 4;
pub const KE_EVAL_TIMEOUT: ke_eval_status = 5;
pub const KE_EVAL_INVALID: ke_eval_status = 6;

pub type ke_source_kind = c_int;
pub const KE_SOURCE_REFERENCE: ke_source_kind = 0;
pub const KE_SOURCE_SEED: ke_source_kind = 1;

pub type ke_progress_event = c_int;
pub const KE_PROGRESS_START: ke_progress_event = 0;
pub const KE_PROGRESS_NODE: ke_progress_event = 1;
pub const KE_PROGRESS_MUTATOR_FAILURE: ke_progress_event = 2;
pub const KE_PROGRESS_FINISH: ke_progress_event = 3;

macro_rules! opaque {
    ($($name:ident),*) => {
        $(#[repr(C)] pub struct $name { _private: [u8; 0] })*
    };
}
opaque!(
    ke_spec,
    ke_device_list,
    ke_device_info,
    ke_node,
    ke_stop_rule,
    ke_mutator,
    ke_mutation,
    ke_candidate,
    ke_evaluation,
    ke_result,
    ke_evolver,
    ke_store,
    ke_program
);

pub const KE_PROGRAM_OPTIONS_VERSION: c_uint = 1;
pub const KE_PROGRAM_ANY_SHAPE: c_uint = 1;
pub const KE_PROGRAM_WAIT: c_uint = 2;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ke_program_options {
    pub version: c_uint,
    pub run: i64,
    pub node: i64,
    pub device: *const c_char,
}

pub const KE_TIMING_VERSION: c_uint = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ke_timing {
    pub version: c_uint,
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub mad_us: f64,
    pub samples: c_int,
}

pub const KE_MISMATCH_VERSION: c_uint = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ke_mismatch {
    pub version: c_uint,
    pub buffer: *const c_char,
    pub workload: usize,
    pub trial: c_int,
    pub index: i64,
    pub got: f64,
    pub expected: f64,
    pub excess: f64,
}

pub const KE_PARAM_MUTATOR_OPTIONS_VERSION: c_uint = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ke_param_mutator_options {
    pub version: c_uint,
    pub restart_probability: f64,
}

pub const KE_COMMAND_MUTATOR_OPTIONS_VERSION: c_uint = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ke_command_mutator_options {
    pub version: c_uint,
    pub command: *const c_char,
    pub timeout_s: f64,
}

pub const KE_LLM_MUTATOR_OPTIONS_VERSION: c_uint = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ke_llm_mutator_options {
    pub version: c_uint,
    pub api: *const c_char,
    pub base_url: *const c_char,
    pub model: *const c_char,
    pub api_key_env: *const c_char,
    pub temperature: f64,
    pub max_tokens: c_int,
    pub timeout_s: f64,
    pub max_retries: c_int,
    pub max_in_flight: c_int,
    pub memory: *const c_char,
    pub knowledge_dirs: *const *const c_char,
    pub knowledge_dir_count: usize,
    pub device_description: *const c_char,
}

pub const KE_EVOLVER_OPTIONS_VERSION: c_uint = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ke_evolver_options {
    pub version: c_uint,
    pub device: *const c_char,
    pub seed: u64,
    pub jobs: c_int,
    pub in_process: c_int,
    pub timeout_s: f64,
    pub worker_path: *const c_char,
    pub timing_lock: *const c_char,
    pub trials: c_int,
    pub max_consecutive_mutator_failures: c_int,
}

pub const KE_PROGRESS_VERSION: c_uint = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ke_progress {
    pub version: c_uint,
    pub event: ke_progress_event,
    pub node: *const ke_node,
    pub evaluations: i64,
    pub elapsed_s: f64,
    pub best_speedup: f64,
    pub evaluations_since_improvement: i64,
    pub tokens: i64,
    pub message: *const c_char,
}

pub const KE_SEARCH_STATE_VERSION: c_uint = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ke_search_state {
    pub version: c_uint,
    pub evaluations: i64,
    pub elapsed_s: f64,
    pub best_speedup: f64,
    pub evaluations_since_improvement: i64,
    pub tokens: i64,
}

pub type ke_stop_fn = Option<
    unsafe extern "C" fn(state: *const ke_search_state, user_data: *mut c_void) -> c_int,
>;
pub type ke_free_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
pub type ke_mutate_fn =
    Option<unsafe extern "C" fn(mutation: *mut ke_mutation, user_data: *mut c_void) -> c_int>;
pub type ke_evaluate_fn = Option<
    unsafe extern "C" fn(
        candidate: *const ke_candidate,
        evaluation: *mut ke_evaluation,
        user_data: *mut c_void,
    ) -> c_int,
>;
pub type ke_progress_fn =
    Option<unsafe extern "C" fn(progress: *const ke_progress, user_data: *mut c_void) -> c_int>;

extern "C" {
    // Status, errors, version
    pub fn ke_last_error() -> *const c_char;
    pub fn ke_status_name(out: *mut *const c_char, status: ke_status) -> ke_status;
    pub fn ke_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int) -> ke_status;

    // Spec
    pub fn ke_spec_load(out: *mut *mut ke_spec, path: *const c_char) -> ke_status;
    pub fn ke_spec_parse(
        out: *mut *mut ke_spec,
        json: *const c_char,
        path: *const c_char,
    ) -> ke_status;
    pub fn ke_spec_create(
        out: *mut *mut ke_spec,
        name: *const c_char,
        language: *const c_char,
        entry: *const c_char,
    ) -> ke_status;
    pub fn ke_spec_destroy(spec: *mut ke_spec) -> ke_status;
    pub fn ke_spec_add_buffer(
        spec: *mut ke_spec,
        name: *const c_char,
        dtype: *const c_char,
        role: *const c_char,
        shape: *const *const c_char,
        rank: usize,
    ) -> ke_status;
    pub fn ke_spec_add_size(
        spec: *mut ke_spec,
        name: *const c_char,
        dtype: *const c_char,
    ) -> ke_status;
    pub fn ke_spec_add_scalar(
        spec: *mut ke_spec,
        name: *const c_char,
        dtype: *const c_char,
        value: f64,
    ) -> ke_status;
    pub fn ke_spec_add_workload(
        spec: *mut ke_spec,
        names: *const *const c_char,
        values: *const i64,
        count: usize,
    ) -> ke_status;
    pub fn ke_spec_set_input(
        spec: *mut ke_spec,
        buffer: *const c_char,
        distribution: *const c_char,
        a: f64,
        b: f64,
    ) -> ke_status;
    pub fn ke_spec_set_tolerance(spec: *mut ke_spec, atol: f64, rtol: f64) -> ke_status;
    pub fn ke_spec_set_source(
        spec: *mut ke_spec,
        kind: ke_source_kind,
        source: *const c_char,
        language: *const c_char,
        device: *const c_char,
    ) -> ke_status;
    pub fn ke_spec_set_source_file(
        spec: *mut ke_spec,
        kind: ke_source_kind,
        path: *const c_char,
        language: *const c_char,
        device: *const c_char,
    ) -> ke_status;
    pub fn ke_spec_add_tunable(
        spec: *mut ke_spec,
        name: *const c_char,
        values: *const i64,
        count: usize,
    ) -> ke_status;
    pub fn ke_spec_add_constraint(spec: *mut ke_spec, expression: *const c_char) -> ke_status;
    pub fn ke_spec_set_launch(
        spec: *mut ke_spec,
        grid: *const *const c_char,
        block: *const *const c_char,
        shared_bytes: *const c_char,
    ) -> ke_status;
    pub fn ke_spec_set_cost(
        spec: *mut ke_spec,
        flops: *const c_char,
        bytes: *const c_char,
    ) -> ke_status;
    pub fn ke_spec_set_notes(spec: *mut ke_spec, notes: *const c_char) -> ke_status;
    pub fn ke_spec_validate(spec: *const ke_spec) -> ke_status;
    pub fn ke_spec_name(out: *mut *const c_char, spec: *const ke_spec) -> ke_status;
    pub fn ke_spec_workload_count(out: *mut usize, spec: *const ke_spec) -> ke_status;
    pub fn ke_spec_to_json(out: *mut *const c_char, spec: *const ke_spec) -> ke_status;

    // Devices
    pub fn ke_device_list_create(out: *mut *mut ke_device_list) -> ke_status;
    pub fn ke_device_list_destroy(list: *mut ke_device_list) -> ke_status;
    pub fn ke_device_list_count(out: *mut usize, list: *const ke_device_list) -> ke_status;
    pub fn ke_device_list_get(
        out: *mut *const ke_device_info,
        list: *const ke_device_list,
        index: usize,
    ) -> ke_status;
    pub fn ke_device_info_id(out: *mut *const c_char, info: *const ke_device_info) -> ke_status;
    pub fn ke_device_info_kind(out: *mut *const c_char, info: *const ke_device_info) -> ke_status;
    pub fn ke_device_info_name(out: *mut *const c_char, info: *const ke_device_info) -> ke_status;
    pub fn ke_device_info_compute_units(out: *mut c_int, info: *const ke_device_info) -> ke_status;
    pub fn ke_device_info_vector_bits(out: *mut c_int, info: *const ke_device_info) -> ke_status;
    pub fn ke_device_info_peak_bytes_per_s(out: *mut f64, info: *const ke_device_info)
        -> ke_status;
    pub fn ke_device_info_peak_flops_per_s(out: *mut f64, info: *const ke_device_info)
        -> ke_status;
    pub fn ke_device_info_property_count(out: *mut usize, info: *const ke_device_info)
        -> ke_status;
    pub fn ke_device_info_property(
        key: *mut *const c_char,
        value: *mut *const c_char,
        info: *const ke_device_info,
        index: usize,
    ) -> ke_status;

    // Nodes
    pub fn ke_eval_status_name(out: *mut *const c_char, status: ke_eval_status) -> ke_status;
    pub fn ke_node_id(out: *mut i64, node: *const ke_node) -> ke_status;
    pub fn ke_node_status(out: *mut ke_eval_status, node: *const ke_node) -> ke_status;
    pub fn ke_node_message(out: *mut *const c_char, node: *const ke_node) -> ke_status;
    pub fn ke_node_source(out: *mut *const c_char, node: *const ke_node) -> ke_status;
    pub fn ke_node_language(out: *mut *const c_char, node: *const ke_node) -> ke_status;
    pub fn ke_node_mutator(out: *mut *const c_char, node: *const ke_node) -> ke_status;
    pub fn ke_node_note(out: *mut *const c_char, node: *const ke_node) -> ke_status;
    pub fn ke_node_compile_log(out: *mut *const c_char, node: *const ke_node) -> ke_status;
    pub fn ke_node_speedup(out: *mut f64, node: *const ke_node) -> ke_status;
    pub fn ke_node_created_s(out: *mut f64, node: *const ke_node) -> ke_status;
    pub fn ke_node_parent_count(out: *mut usize, node: *const ke_node) -> ke_status;
    pub fn ke_node_parent(out: *mut i64, node: *const ke_node, index: usize) -> ke_status;
    pub fn ke_node_tunable_count(out: *mut usize, node: *const ke_node) -> ke_status;
    pub fn ke_node_tunable(
        name: *mut *const c_char,
        value: *mut i64,
        node: *const ke_node,
        index: usize,
    ) -> ke_status;
    pub fn ke_node_tunable_value(
        out: *mut i64,
        node: *const ke_node,
        name: *const c_char,
    ) -> ke_status;
    pub fn ke_node_timing_count(out: *mut usize, node: *const ke_node) -> ke_status;
    pub fn ke_node_timing(out: *mut ke_timing, node: *const ke_node, workload: usize) -> ke_status;
    pub fn ke_node_mismatch(out: *mut ke_mismatch, node: *const ke_node) -> ke_status;
    pub fn ke_node_prompt(out: *mut *const c_char, node: *const ke_node) -> ke_status;
    pub fn ke_node_answer(out: *mut *const c_char, node: *const ke_node) -> ke_status;
    pub fn ke_node_tokens(out: *mut i64, node: *const ke_node) -> ke_status;
    pub fn ke_node_cost_usd(out: *mut f64, node: *const ke_node) -> ke_status;
    pub fn ke_node_model(out: *mut *const c_char, node: *const ke_node) -> ke_status;

    // Stop rules
    pub fn ke_stop_rule_max_evaluations(out: *mut *mut ke_stop_rule, evaluations: i64)
        -> ke_status;
    pub fn ke_stop_rule_max_time(out: *mut *mut ke_stop_rule, seconds: f64) -> ke_status;
    pub fn ke_stop_rule_target_speedup(out: *mut *mut ke_stop_rule, speedup: f64) -> ke_status;
    pub fn ke_stop_rule_plateau(out: *mut *mut ke_stop_rule, evaluations: i64) -> ke_status;
    pub fn ke_stop_rule_max_tokens(out: *mut *mut ke_stop_rule, tokens: i64) -> ke_status;
    pub fn ke_stop_rule_max_cost(out: *mut *mut ke_stop_rule, usd: f64) -> ke_status;
    pub fn ke_stop_rule_callback(
        out: *mut *mut ke_stop_rule,
        name: *const c_char,
        should_stop: ke_stop_fn,
        user_data: *mut c_void,
        free_user_data: ke_free_fn,
    ) -> ke_status;
    pub fn ke_stop_rule_any(
        out: *mut *mut ke_stop_rule,
        rules: *const *const ke_stop_rule,
        count: usize,
    ) -> ke_status;
    pub fn ke_stop_rule_all(
        out: *mut *mut ke_stop_rule,
        rules: *const *const ke_stop_rule,
        count: usize,
    ) -> ke_status;
    pub fn ke_stop_rule_destroy(rule: *mut ke_stop_rule) -> ke_status;

    // Mutators
    pub fn ke_param_mutator_options_init(
        options: *mut ke_param_mutator_options,
        version: c_uint,
    ) -> ke_status;
    pub fn ke_mutator_param_create(
        out: *mut *mut ke_mutator,
        options: *const ke_param_mutator_options,
    ) -> ke_status;
    pub fn ke_command_mutator_options_init(
        options: *mut ke_command_mutator_options,
        version: c_uint,
    ) -> ke_status;
    pub fn ke_mutator_command_create(
        out: *mut *mut ke_mutator,
        options: *const ke_command_mutator_options,
    ) -> ke_status;
    pub fn ke_mutator_custom_create(
        out: *mut *mut ke_mutator,
        name: *const c_char,
        mutate: ke_mutate_fn,
        user_data: *mut c_void,
    ) -> ke_status;
    pub fn ke_mutator_destroy(mutator: *mut ke_mutator) -> ke_status;
    pub fn ke_mutation_parent_count(out: *mut usize, mutation: *const ke_mutation) -> ke_status;
    pub fn ke_mutation_parent(
        out: *mut *const ke_node,
        mutation: *const ke_mutation,
        index: usize,
    ) -> ke_status;
    pub fn ke_mutation_node_count(out: *mut usize, mutation: *const ke_mutation) -> ke_status;
    pub fn ke_mutation_node(
        out: *mut *const ke_node,
        mutation: *const ke_mutation,
        id: i64,
    ) -> ke_status;
    pub fn ke_mutation_request_json(
        out: *mut *const c_char,
        mutation: *const ke_mutation,
    ) -> ke_status;
    pub fn ke_mutation_random(out: *mut u64, mutation: *mut ke_mutation) -> ke_status;
    pub fn ke_mutation_set_source(mutation: *mut ke_mutation, source: *const c_char) -> ke_status;
    pub fn ke_mutation_set_tunable(
        mutation: *mut ke_mutation,
        name: *const c_char,
        value: i64,
    ) -> ke_status;
    pub fn ke_mutation_set_note(mutation: *mut ke_mutation, note: *const c_char) -> ke_status;
    pub fn ke_mutation_set_transcript(
        mutation: *mut ke_mutation,
        prompt: *const c_char,
        answer: *const c_char,
    ) -> ke_status;
    pub fn ke_mutation_add_tokens(mutation: *mut ke_mutation, tokens: i64) -> ke_status;
    pub fn ke_mutation_add_cost(mutation: *mut ke_mutation, usd: f64) -> ke_status;
    pub fn ke_mutation_fail(mutation: *mut ke_mutation, error: *const c_char) -> ke_status;
    pub fn ke_mutation_set_exhausted(
        mutation: *mut ke_mutation,
        reason: *const c_char,
    ) -> ke_status;

    // Custom fitness
    pub fn ke_candidate_source(
        out: *mut *const c_char,
        candidate: *const ke_candidate,
    ) -> ke_status;
    pub fn ke_candidate_language(
        out: *mut *const c_char,
        candidate: *const ke_candidate,
    ) -> ke_status;
    pub fn ke_candidate_tunable_count(out: *mut usize, candidate: *const ke_candidate)
        -> ke_status;
    pub fn ke_candidate_tunable(
        name: *mut *const c_char,
        value: *mut i64,
        candidate: *const ke_candidate,
        index: usize,
    ) -> ke_status;
    pub fn ke_candidate_tunable_value(
        out: *mut i64,
        candidate: *const ke_candidate,
        name: *const c_char,
    ) -> ke_status;
    pub fn ke_candidate_workload_count(
        out: *mut usize,
        candidate: *const ke_candidate,
    ) -> ke_status;
    pub fn ke_candidate_input_seed(out: *mut u64, candidate: *const ke_candidate) -> ke_status;
    pub fn ke_evaluation_set_status(
        evaluation: *mut ke_evaluation,
        status: ke_eval_status,
    ) -> ke_status;
    pub fn ke_evaluation_set_message(
        evaluation: *mut ke_evaluation,
        message: *const c_char,
    ) -> ke_status;
    pub fn ke_evaluation_set_compile_log(
        evaluation: *mut ke_evaluation,
        log: *const c_char,
    ) -> ke_status;
    pub fn ke_evaluation_set_time_us(
        evaluation: *mut ke_evaluation,
        workload: usize,
        median_us: f64,
        spread_us: f64,
    ) -> ke_status;

    // Results
    pub fn ke_result_destroy(result: *mut ke_result) -> ke_status;
    pub fn ke_result_node_count(out: *mut usize, result: *const ke_result) -> ke_status;
    pub fn ke_result_node(out: *mut *const ke_node, result: *const ke_result, id: i64)
        -> ke_status;
    pub fn ke_result_seed(out: *mut *const ke_node, result: *const ke_result) -> ke_status;
    pub fn ke_result_best(out: *mut *const ke_node, result: *const ke_result) -> ke_status;
    pub fn ke_result_lineage(
        ids: *mut *const i64,
        count: *mut usize,
        result: *const ke_result,
        id: i64,
    ) -> ke_status;
    pub fn ke_result_children(
        ids: *mut *const i64,
        count: *mut usize,
        result: *const ke_result,
        id: i64,
    ) -> ke_status;
    pub fn ke_result_stop_reason(out: *mut *const c_char, result: *const ke_result) -> ke_status;
    pub fn ke_result_evaluations(out: *mut i64, result: *const ke_result) -> ke_status;
    pub fn ke_result_status_count(
        out: *mut i64,
        result: *const ke_result,
        status: ke_eval_status,
    ) -> ke_status;
    pub fn ke_result_elapsed_s(out: *mut f64, result: *const ke_result) -> ke_status;
    pub fn ke_result_mutator_failures(out: *mut i64, result: *const ke_result) -> ke_status;
    pub fn ke_result_tokens(out: *mut i64, result: *const ke_result) -> ke_status;
    pub fn ke_result_cost_usd(out: *mut f64, result: *const ke_result) -> ke_status;
    pub fn ke_result_confirmation(
        confirmed: *mut c_int,
        speedup: *mut f64,
        speedup_low: *mut f64,
        speedup_high: *mut f64,
        result: *const ke_result,
    ) -> ke_status;
    pub fn ke_result_device(out: *mut *const ke_device_info, result: *const ke_result)
        -> ke_status;
    pub fn ke_result_report_json(out: *mut *const c_char, result: *const ke_result) -> ke_status;
    pub fn ke_result_report_text(out: *mut *const c_char, result: *const ke_result) -> ke_status;

    // Evolver
    pub fn ke_evolver_options_init(options: *mut ke_evolver_options, version: c_uint) -> ke_status;
    pub fn ke_evolver_create(
        out: *mut *mut ke_evolver,
        spec: *const ke_spec,
        options: *const ke_evolver_options,
    ) -> ke_status;
    pub fn ke_evolver_destroy(evolver: *mut ke_evolver) -> ke_status;
    pub fn ke_evolver_set_mutator(
        evolver: *mut ke_evolver,
        mutator: *const ke_mutator,
    ) -> ke_status;
    pub fn ke_evolver_set_stop_rule(
        evolver: *mut ke_evolver,
        rule: *const ke_stop_rule,
    ) -> ke_status;
    pub fn ke_evolver_set_policy(
        evolver: *mut ke_evolver,
        name: *const c_char,
        option_names: *const *const c_char,
        option_values: *const *const c_char,
        count: usize,
    ) -> ke_status;
    pub fn ke_policy_names(names: *mut *const *const c_char, count: *mut usize) -> ke_status;
    pub fn ke_evolver_set_progress(
        evolver: *mut ke_evolver,
        progress: ke_progress_fn,
        user_data: *mut c_void,
    ) -> ke_status;
    pub fn ke_evolver_set_evaluator(
        evolver: *mut ke_evolver,
        device_name: *const c_char,
        evaluate: ke_evaluate_fn,
        user_data: *mut c_void,
    ) -> ke_status;
    pub fn ke_evolver_run(out: *mut *mut ke_result, evolver: *mut ke_evolver) -> ke_status;
    pub fn ke_evolver_check(out: *mut *mut ke_result, evolver: *mut ke_evolver) -> ke_status;
    pub fn ke_evolver_result(out: *mut *mut ke_result, evolver: *const ke_evolver) -> ke_status;

    // Model and mix mutators
    pub fn ke_llm_mutator_options_init(
        options: *mut ke_llm_mutator_options,
        version: c_uint,
    ) -> ke_status;
    pub fn ke_mutator_llm_create(
        out: *mut *mut ke_mutator,
        options: *const ke_llm_mutator_options,
    ) -> ke_status;
    pub fn ke_mutator_mix_create(
        out: *mut *mut ke_mutator,
        model: *const ke_mutator,
        params: *const ke_mutator,
        param_steps: c_int,
        model_every: c_int,
    ) -> ke_status;

    // Store
    pub fn ke_store_open(
        out: *mut *mut ke_store,
        path: *const c_char,
        read_only: c_int,
    ) -> ke_status;
    pub fn ke_store_destroy(store: *mut ke_store) -> ke_status;
    pub fn ke_store_path(out: *mut *const c_char, store: *const ke_store) -> ke_status;
    pub fn ke_store_run_count(out: *mut usize, store: *const ke_store) -> ke_status;
    pub fn ke_store_run_id(out: *mut i64, store: *const ke_store, index: usize) -> ke_status;
    pub fn ke_store_latest_run(out: *mut i64, store: *const ke_store) -> ke_status;
    pub fn ke_store_load(out: *mut *mut ke_result, store: *const ke_store, run: i64) -> ke_status;
    pub fn ke_store_show(
        out: *mut *const c_char,
        store: *const ke_store,
        run: i64,
        limit: usize,
    ) -> ke_status;
    pub fn ke_store_best_source(
        out: *mut *const c_char,
        store: *const ke_store,
        run: i64,
    ) -> ke_status;
    pub fn ke_store_export(
        out: *mut *const c_char,
        store: *const ke_store,
        run: i64,
        format: *const c_char,
    ) -> ke_status;
    pub fn ke_evolver_set_store(
        evolver: *mut ke_evolver,
        store: *mut ke_store,
        reuse: c_int,
    ) -> ke_status;
    pub fn ke_evolver_resume(
        out: *mut *mut ke_result,
        evolver: *mut ke_evolver,
        run: i64,
    ) -> ke_status;
    pub fn ke_result_run_id(out: *mut i64, result: *const ke_result) -> ke_status;

    // Program
    pub fn ke_program_options_init(options: *mut ke_program_options, version: c_uint) -> ke_status;
    pub fn ke_program_load(
        out: *mut *mut ke_program,
        database: *const c_char,
        options: *const ke_program_options,
    ) -> ke_status;
    pub fn ke_program_destroy(program: *mut ke_program) -> ke_status;
    pub fn ke_program_param_count(out: *mut usize, program: *const ke_program) -> ke_status;
    pub fn ke_program_param(
        name: *mut *const c_char,
        dtype: *mut *const c_char,
        role: *mut *const c_char,
        program: *const ke_program,
        index: usize,
    ) -> ke_status;
    pub fn ke_program_shape(
        dims: *mut i64,
        capacity: usize,
        ndim: *mut usize,
        program: *const ke_program,
        index: usize,
        sizes: *const i64,
        count: usize,
    ) -> ke_status;
    pub fn ke_program_call(
        program: *mut ke_program,
        args: *const *mut c_void,
        count: usize,
        stream: *mut c_void,
        flags: c_uint,
    ) -> ke_status;
    pub fn ke_program_verified(
        out: *mut c_int,
        program: *const ke_program,
        args: *const *mut c_void,
        count: usize,
    ) -> ke_status;
    pub fn ke_program_calls(out: *mut i64, program: *const ke_program) -> ke_status;
    pub fn ke_program_provenance_json(out: *mut *const c_char, program: *const ke_program) -> ke_status;
    pub fn ke_program_spec_json(out: *mut *const c_char, program: *const ke_program) -> ke_status;
}
