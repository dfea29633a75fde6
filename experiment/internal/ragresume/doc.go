// Package ragresume is the resume record of a rag or selfrag run (Progress, rag.json): the
// finished stages' metrics, table rows and training seconds, restored into the garden run
// (ragkit.GardenRun, ragkit.Eval) when `train -resume` continues it.
package ragresume
