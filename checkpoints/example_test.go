package checkpoints_test

import (
	"fmt"
	"os"

	"github.com/ragtrain/ragtrain/checkpoints"
)

func ExampleSave() {
	run, _ := os.MkdirTemp("", "run")
	defer os.RemoveAll(run)

	ck := &checkpoints.Checkpoint{
		Params:  []checkpoints.Tensor{{Name: "encoder.proj.weight", Shape: []int{2, 2}, Data: []float32{1, 0, 0, 1}}},
		Config:  map[string]any{"encoder": "bow", "hidden": 2},
		Trainer: checkpoints.TrainerState{Phase: "train", Step: 500, Seed: 42},
	}
	if err := checkpoints.Save(run, ck); err != nil {
		fmt.Println(err)
		return
	}
	back, err := checkpoints.Load(run)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.Trainer.Phase, back.Trainer.Step, back.Params[0].Shape, back.Params[0].Data)
	names, _ := checkpoints.Checkpoints(run)
	fmt.Println(names)
	// Output:
	// train 500 [2 2] [1 0 0 1]
	// [checkpoint-train-500]
}
