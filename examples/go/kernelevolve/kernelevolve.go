// Package kernelevolve calls the KernelEvolve C API through cgo: handles wrapped in Go values with a
// Close method, errors carrying the C status and ke_last_error(), and Go closures as progress callbacks.
//
// The compiler and linker find kernelevolve.h and libkernelevolve through CGO_CFLAGS and CGO_LDFLAGS,
// e.g. from pkg-config:
//
//	CGO_CFLAGS="$(pkg-config --cflags kernelevolve)" CGO_LDFLAGS="$(pkg-config --libs kernelevolve)" go build
package kernelevolve

/*
#cgo LDFLAGS: -lkernelevolve
#include <stdint.h>
#include <stdlib.h>
#include <kernelevolve.h>

extern int goProgress(ke_progress* progress, void* user_data);

// The Go callback's handle travels as the callback's user data.
static inline ke_status ke_go_set_progress(ke_evolver* evolver, uintptr_t handle) {
  return ke_evolver_set_progress(evolver, (ke_progress_fn)goProgress, (void*)handle);
}
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// Error is a failed call: the C status and the library's message for this thread.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (status %d)", e.Message, e.Status) }

const (
	ErrInvalidArgument   = int(C.KE_ERROR_INVALID_ARGUMENT)
	ErrBadSpec           = int(C.KE_ERROR_BAD_SPEC)
	ErrDeviceUnavailable = int(C.KE_ERROR_DEVICE_UNAVAILABLE)
	ErrNotFound          = int(C.KE_ERROR_NOT_FOUND)
	ErrAborted           = int(C.KE_ERROR_ABORTED)
)

// check must run on the thread that made the call: cgo calls pin the goroutine to its thread for the
// call only, so the message is read in the same cgo call sequence, right after.
func check(status C.ke_status) error {
	if status == C.KE_OK {
		return nil
	}
	return &Error{Status: int(status), Message: C.GoString(C.ke_last_error())}
}

// Version is the library's version.
func Version() (major, minor, patch int) {
	var a, b, c C.int
	C.ke_version(&a, &b, &c)
	return int(a), int(b), int(c)
}

// Spec is the problem.
type Spec struct{ raw *C.ke_spec }

// LoadSpec loads and validates a spec file.
func LoadSpec(path string) (*Spec, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var raw *C.ke_spec
	if err := check(C.ke_spec_load(&raw, cpath)); err != nil {
		return nil, err
	}
	return &Spec{raw}, nil
}

func (s *Spec) Name() string {
	var out *C.char
	C.ke_spec_name(&out, s.raw)
	return C.GoString(out)
}

func (s *Spec) Close() { C.ke_spec_destroy(s.raw); s.raw = nil }

// StopRule says when a search stops.
type StopRule struct{ raw *C.ke_stop_rule }

func newRule(status C.ke_status, raw *C.ke_stop_rule) (*StopRule, error) {
	if err := check(status); err != nil {
		return nil, err
	}
	return &StopRule{raw}, nil
}

func MaxEvaluations(n int64) (*StopRule, error) {
	var raw *C.ke_stop_rule
	return newRule(C.ke_stop_rule_max_evaluations(&raw, C.int64_t(n)), raw)
}

func MaxTime(seconds float64) (*StopRule, error) {
	var raw *C.ke_stop_rule
	return newRule(C.ke_stop_rule_max_time(&raw, C.double(seconds)), raw)
}

func TargetSpeedup(x float64) (*StopRule, error) {
	var raw *C.ke_stop_rule
	return newRule(C.ke_stop_rule_target_speedup(&raw, C.double(x)), raw)
}

func Plateau(n int64) (*StopRule, error) {
	var raw *C.ke_stop_rule
	return newRule(C.ke_stop_rule_plateau(&raw, C.int64_t(n)), raw)
}

// Any stops when one of the rules would. The rules may be closed after.
func Any(rules ...*StopRule) (*StopRule, error) {
	raws := make([]*C.ke_stop_rule, len(rules))
	for i, r := range rules {
		raws[i] = r.raw
	}
	var raw *C.ke_stop_rule
	return newRule(C.ke_stop_rule_any(&raw, (**C.ke_stop_rule)(unsafe.Pointer(&raws[0])), C.size_t(len(raws))), raw)
}

func (r *StopRule) Close() { C.ke_stop_rule_destroy(r.raw); r.raw = nil }

// Mutator makes children.
type Mutator struct{ raw *C.ke_mutator }

// ParamMutator searches the spec's tunables.
func ParamMutator() (*Mutator, error) {
	var raw *C.ke_mutator
	if err := check(C.ke_mutator_param_create(&raw, nil)); err != nil {
		return nil, err
	}
	return &Mutator{raw}, nil
}

func (m *Mutator) Close() { C.ke_mutator_destroy(m.raw); m.raw = nil }

// Node is a kernel variant, borrowed from a Result (or a progress callback, for its length).
type Node struct{ raw *C.ke_node }

func (n Node) ID() int64 {
	var id C.int64_t
	C.ke_node_id(&id, n.raw)
	return int64(id)
}

func (n Node) Speedup() float64 {
	var s C.double
	C.ke_node_speedup(&s, n.raw)
	return float64(s)
}

func (n Node) Note() string {
	var out *C.char
	C.ke_node_note(&out, n.raw)
	return C.GoString(out)
}

func (n Node) Source() string {
	var out *C.char
	C.ke_node_source(&out, n.raw)
	return C.GoString(out)
}

// Status is "ok", "compile_error", "incorrect", "crashed", "timeout", "invalid" or "pending".
func (n Node) Status() string {
	var s C.ke_eval_status
	C.ke_node_status(&s, n.raw)
	var name *C.char
	C.ke_eval_status_name(&name, s)
	return C.GoString(name)
}

// Tunables in name order.
func (n Node) Tunables() map[string]int64 {
	var count C.size_t
	C.ke_node_tunable_count(&count, n.raw)
	out := make(map[string]int64, int(count))
	for i := C.size_t(0); i < count; i++ {
		var name *C.char
		var value C.int64_t
		C.ke_node_tunable(&name, &value, n.raw, i)
		out[C.GoString(name)] = int64(value)
	}
	return out
}

// Progress is what a progress callback sees.
type Progress struct {
	Event       int // 0 start, 1 node, 2 mutator failure, 3 finish
	Node        *Node
	Evaluations int64
	ElapsedS    float64
	BestSpeedup float64
	Message     string
}

//export goProgress
func goProgress(p *C.ke_progress, userData unsafe.Pointer) C.int {
	callback := cgo.Handle(uintptr(userData)).Value().(func(Progress) bool)
	progress := Progress{
		Event:       int(p.event),
		Evaluations: int64(p.evaluations),
		ElapsedS:    float64(p.elapsed_s),
		BestSpeedup: float64(p.best_speedup),
		Message:     C.GoString(p.message),
	}
	if p.node != nil {
		progress.Node = &Node{p.node}
	}
	if callback(progress) {
		return 0
	}
	return 1 // the callback asked to stop: the run is aborted
}

// Evolver composes the parts and runs the search.
type Evolver struct {
	raw      *C.ke_evolver
	progress cgo.Handle
}

// NewEvolver evaluates on `device` ("cpu", "cuda:0", ...) in worker processes.
func NewEvolver(spec *Spec, device string, seed uint64) (*Evolver, error) {
	var options C.ke_evolver_options
	if err := check(C.ke_evolver_options_init(&options, C.KE_EVOLVER_OPTIONS_VERSION)); err != nil {
		return nil, err
	}
	cdevice := C.CString(device)
	defer C.free(unsafe.Pointer(cdevice))
	options.device = cdevice
	options.seed = C.uint64_t(seed)
	var raw *C.ke_evolver
	if err := check(C.ke_evolver_create(&raw, spec.raw, &options)); err != nil {
		return nil, err
	}
	return &Evolver{raw: raw}, nil
}

func (e *Evolver) SetMutator(m *Mutator) error { return check(C.ke_evolver_set_mutator(e.raw, m.raw)) }

func (e *Evolver) SetStopRule(r *StopRule) error {
	return check(C.ke_evolver_set_stop_rule(e.raw, r.raw))
}

func (e *Evolver) SetPolicy(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return check(C.ke_evolver_set_policy(e.raw, cname, nil, nil, 0))
}

// OnProgress installs a callback, run on the goroutine that calls Run; returning false aborts the run.
func (e *Evolver) OnProgress(callback func(Progress) bool) error {
	handle := cgo.NewHandle(callback)
	if err := check(C.ke_go_set_progress(e.raw, C.uintptr_t(handle))); err != nil {
		handle.Delete()
		return err
	}
	if e.progress != 0 {
		e.progress.Delete()
	}
	e.progress = handle
	return nil
}

// Run evaluates the seed, then searches until a stop rule fires.
func (e *Evolver) Run() (*Result, error) {
	var raw *C.ke_result
	if err := check(C.ke_evolver_run(&raw, e.raw)); err != nil {
		return nil, err
	}
	return &Result{raw}, nil
}

func (e *Evolver) Close() {
	C.ke_evolver_destroy(e.raw)
	e.raw = nil
	if e.progress != 0 {
		e.progress.Delete()
		e.progress = 0
	}
}

// Result is what a run found.
type Result struct{ raw *C.ke_result }

func (r *Result) Best() (Node, error) {
	var raw *C.ke_node
	if err := check(C.ke_result_best(&raw, r.raw)); err != nil {
		return Node{}, err
	}
	return Node{raw}, nil
}

// Lineage is the chain of node ids from the seed to `id`.
func (r *Result) Lineage(id int64) ([]int64, error) {
	var ids *C.int64_t
	var count C.size_t
	if err := check(C.ke_result_lineage(&ids, &count, r.raw, C.int64_t(id))); err != nil {
		return nil, err
	}
	out := make([]int64, int(count))
	copy(out, unsafe.Slice((*int64)(unsafe.Pointer(ids)), int(count)))
	return out, nil
}

func (r *Result) ReportJSON() string {
	var out *C.char
	C.ke_result_report_json(&out, r.raw)
	return C.GoString(out)
}

func (r *Result) ReportText() string {
	var out *C.char
	C.ke_result_report_text(&out, r.raw)
	return C.GoString(out)
}

func (r *Result) Close() { C.ke_result_destroy(r.raw); r.raw = nil }
