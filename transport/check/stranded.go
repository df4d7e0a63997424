package check

// Stranded counts the messages a repair would give back to consumers now:
// held by consumers proven dead (requeued, re-published in place, deferred
// for room, or returned), or left by a dead deque owner at the bottom
// (its pop rolled back, its last push counted in). Until a repair runs,
// no consumer takes them, so a tool that pushes or takes messages warns
// when it is not 0 (ringctl drain, push and watch do).
func (r Report) Stranded() int {
	n := 0
	for _, f := range r.Findings {
		switch f.Action {
		case ActionRequeue, ActionRequeueInPlace, ActionDefer, ActionReturn, ActionRollBack, ActionCountIn:
			n++
		}
	}
	return n
}
