// Package pool is gvx's one warm-pool engine: items (episodes) booted
// ahead of demand, handed over by claims, and replaced in the background.
// gvx.Pool keeps its warm episodes in a Set of its own, and rungv serve
// keeps each of its warm requests (serve.WarmSpec) in a Set of one Group;
// the engine knows nothing of sandboxes: Ops boots, measures, watches and
// tears down the items.
//
// What the engine owns, for both:
//
//   - the fill: a Set keeps Count items ready or booting, fewer under the
//     Group's memory cap; a failed boot is retried, backing off from
//     100 ms to 10 s, and its error is what a waiting claim returns;
//   - the refill delay: a claimed item's replacement waits RefillDelay
//     before it boots, so that a burst of claims has the CPUs before the
//     boots behind it; a claim that finds the Set empty ends the wait at
//     once, and a boot whose wait ended re-checks it is still wanted (a
//     PutBack may have made it surplus);
//   - the urgency of a boot: Ops.Boot gets a channel closed when a claimer
//     waits for it (Claim), which ends the boot's low priority
//     (gvx.PoolConfig.RefillNice) in the caller's boot;
//   - the memory cap, by measured cost: each ready item's idle memory
//     (Ops.Memory: its processes' PSS) is measured once; the Group keeps
//     no more of a Set than fit beside the other Sets' ready items and
//     booting ones (at their largest cost measured); until a Set's cost is
//     known it boots one at a time; an item that would take the ready ones
//     over the cap is discarded; one that cannot be measured, or alone is
//     over the cap, leaves its Set with none;
//   - the exclusive handover: an item is booting, ready (on one Set's
//     list), handed over (taken from the list under the Group's lock by
//     exactly one claim) or discarded; a ready item whose Done closes
//     leaves the list and is discarded;
//   - the stop: Stop refuses claims and boots and cancels the boots' ctx;
//     Wait waits for every boot and discard under way and returns the
//     ready items left, for the caller to tear down.
//
// Every method is safe for concurrent use. Ops are called without the
// Group's lock held, but for Memory, which only reads what Boot recorded.
package pool
