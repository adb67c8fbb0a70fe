// Evolves a kernel from a spec file through the C API, from Go: the parameter search, a stop rule, a
// progress callback; then the best kernel, its lineage and the JSON report.
//
//	evolve_go SPEC [MAX_EVALS]        e.g. evolve_go problems/level1/row_sum/cpu.json 24
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"kernelevolve.example/evolve/kernelevolve"
)

func evolve(path string, maxEvals int64) (float64, error) {
	major, minor, patch := kernelevolve.Version()
	fmt.Fprintf(os.Stderr, "KernelEvolve %d.%d.%d from Go\n", major, minor, patch)

	spec, err := kernelevolve.LoadSpec(path)
	if err != nil {
		return 0, err
	}
	defer spec.Close()
	evolver, err := kernelevolve.NewEvolver(spec, "cpu", 7)
	if err != nil {
		return 0, err
	}
	defer evolver.Close()
	mutator, err := kernelevolve.ParamMutator()
	if err != nil {
		return 0, err
	}
	defer mutator.Close()
	if err := evolver.SetMutator(mutator); err != nil {
		return 0, err
	}
	evals, err := kernelevolve.MaxEvaluations(maxEvals)
	if err != nil {
		return 0, err
	}
	defer evals.Close()
	plateau, err := kernelevolve.Plateau(40)
	if err != nil {
		return 0, err
	}
	defer plateau.Close()
	stop, err := kernelevolve.Any(evals, plateau)
	if err != nil {
		return 0, err
	}
	defer stop.Close()
	if err := evolver.SetStopRule(stop); err != nil {
		return 0, err
	}
	best := 0.0
	err = evolver.OnProgress(func(p kernelevolve.Progress) bool {
		if p.Node != nil && p.Node.Speedup() > best {
			best = p.Node.Speedup()
			fmt.Fprintf(os.Stderr, "node %d: %.2fx after %d evaluations (%s)\n", p.Node.ID(), best, p.Evaluations, p.Node.Note())
		}
		return true // go on
	})
	if err != nil {
		return 0, err
	}

	result, err := evolver.Run()
	if err != nil {
		return 0, err
	}
	defer result.Close()
	fmt.Fprint(os.Stderr, result.ReportText())
	node, err := result.Best()
	if err != nil {
		return 0, err
	}
	lineage, err := result.Lineage(node.ID())
	if err != nil {
		return 0, err
	}
	fmt.Printf("best speedup %.2fx with %v\nlineage: %v\n%s\n", node.Speedup(), node.Tunables(), lineage, result.ReportJSON())
	return node.Speedup(), nil
}

func main() {
	// ke_last_error is per thread: keep each call and its error check on one thread.
	runtime.LockOSThread()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: evolve_go SPEC [MAX_EVALS]")
		os.Exit(2)
	}
	maxEvals := int64(24)
	if len(os.Args) > 2 {
		if n, err := strconv.ParseInt(os.Args[2], 10, 64); err == nil {
			maxEvals = n
		}
	}
	speedup, err := evolve(os.Args[1], maxEvals)
	if err != nil {
		fmt.Fprintln(os.Stderr, "evolve_go:", err)
		var kerr *kernelevolve.Error
		if errors.As(err, &kerr) && (kerr.Status == kernelevolve.ErrBadSpec || kerr.Status == kernelevolve.ErrInvalidArgument) {
			os.Exit(2)
		}
		os.Exit(1)
	}
	if speedup < 1 {
		os.Exit(1)
	}
}
