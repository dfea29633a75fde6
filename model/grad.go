package model

import (
	"gorgonia.org/gorgonia"
)

// Grad is gorgonia.Grad(cost, wrt...) without the gradient terms that no returned gradient
// reads. Gorgonia's backpropagation asks every op on a path from wrt to cost for the gradients
// of all its differentiable inputs, and a machine compiled from the graph runs every node it
// holds: with LoRA, the frozen weights' gradients (a linear layer's gᵀ·x for each of the seven
// projections of every block, the tied LM head's over every token) and the gradient of the first
// block's input would be computed at every step and never read. The gradient of a node that no
// wrt node reaches (through the nodes that consume it) flows only into nodes that no wrt node
// reaches either, so it cannot be part of a gradient of wrt: while Gorgonia differentiates, the
// custom ops of this package report such inputs not differentiable and build no term for them.
// The gradients returned are the same nodes computed in the same order, so their values are the
// same bit for bit; Gorgonia's own ops (sums, scalings) still build all their terms.
func Grad(cost *gorgonia.Node, wrt ...*gorgonia.Node) (gorgonia.Nodes, error) {
	g := cost.Graph()
	reached := make(map[*gorgonia.Node]bool, len(g.AllNodes()))
	stack := append(gorgonia.Nodes(nil), wrt...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if reached[n] {
			continue
		}
		reached[n] = true
		for it := g.To(n.ID()); it.Next(); {
			stack = append(stack, it.Node().(*gorgonia.Node))
		}
	}
	var marked []*customOp
	defer func() {
		for _, o := range marked {
			o.unneeded = nil
		}
	}()
	for _, n := range g.AllNodes() {
		o, ok := n.Op().(*customOp)
		if !ok || !reached[n] {
			continue // Gorgonia never differentiates a node that no wrt node reaches
		}
		var unneeded []bool
		i := 0
		for it := g.From(n.ID()); it.Next(); i++ {
			if !reached[it.Node().(*gorgonia.Node)] {
				if unneeded == nil {
					unneeded = make([]bool, o.Arity())
				}
				unneeded[i] = true
			}
		}
		if unneeded != nil && i == o.Arity() {
			o.unneeded = unneeded
			marked = append(marked, o)
		}
	}
	return gorgonia.Grad(cost, wrt...)
}
