package transport

// TEMPORARY: replaced at merge. The cli branch renders Check and
// PlanRepair, which other branches implement; these stubs only let it
// compile and report nothing.

// Check is a stub (TEMPORARY: replaced at merge).
func (r *Ring) Check() CheckReport { return CheckReport{} }

// PlanRepair is a stub (TEMPORARY: replaced at merge).
func (r *Ring) PlanRepair() []Finding { return []Finding{} }

// Check is a stub (TEMPORARY: replaced at merge).
func (d *Deque) Check() CheckReport { return CheckReport{} }

// PlanRepair is a stub (TEMPORARY: replaced at merge).
func (d *Deque) PlanRepair() []Finding { return []Finding{} }

// Check is a stub (TEMPORARY: replaced at merge).
func (m *HashMap) Check() CheckReport { return CheckReport{} }

// PlanRepair is a stub (TEMPORARY: replaced at merge).
func (m *HashMap) PlanRepair() []Finding { return []Finding{} }
