//! The group leader's assignor: given the live members of the mirrorgate group (with what each
//! owned before the rebalance) and the mirror work, decides which member copies which mirror
//! partition and runs which mirror's metadata sync. Pure and deterministic: the same input gives
//! the same output on every instance, whatever the order of the member list. It never does I/O.
//!
//! Balanced: the partition counts of any two members differ by at most 1, and so do their mirror
//! counts. Sticky: an item stays with the member that owned it before whenever balance allows
//! (the members with the most kept items get the larger quotas), so a rebalance moves as little
//! work as it can.

use std::collections::{BTreeMap, BTreeSet};

/// A destination mirror partition: `(topic, partition index)`.
pub type TopicPartition = (String, i32);

/// One live member of the group as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberInput {
    /// The member id the group coordinator gave the member (JoinGroup `MemberId`).
    pub member_id: String,
    /// Its instance name (`instances.name`), from its metadata.
    pub instance: String,
    /// Partitions it owned in the previous generation, from its metadata.
    pub owned_partitions: BTreeSet<TopicPartition>,
    /// Mirrors whose metadata sync it ran in the previous generation, from its metadata.
    pub owned_mirrors: BTreeSet<String>,
}

/// What one member is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberWork {
    /// Mirror partitions whose copy loop it runs.
    pub partitions: BTreeSet<TopicPartition>,
    /// Mirrors whose metadata sync it runs.
    pub mirrors: BTreeSet<String>,
}

/// The whole plan: per member id, its work; and per partition, the instance name of its owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Work per member id; every member of the input appears, possibly with nothing.
    pub members: BTreeMap<String, MemberWork>,
    /// `(topic, partition)` → instance name of the member that copies it (all partitions).
    pub owners: BTreeMap<TopicPartition, String>,
}

/// Assigns `partitions` and `mirrors` to `members` (see the module docs). With no members the
/// plan is empty. A partition or mirror claimed by several members (a stale member's metadata)
/// is kept by the claimant with the smallest member id, if any.
pub fn assign(members: &[MemberInput], partitions: &BTreeSet<TopicPartition>, mirrors: &BTreeSet<String>) -> Plan {
    let mut sorted: Vec<&MemberInput> = members.iter().collect();
    sorted.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    sorted.dedup_by(|a, b| a.member_id == b.member_id);
    let owned_p: Vec<&BTreeSet<TopicPartition>> = sorted.iter().map(|m| &m.owned_partitions).collect();
    let owned_m: Vec<&BTreeSet<String>> = sorted.iter().map(|m| &m.owned_mirrors).collect();
    let by_p = balance(&owned_p, partitions);
    let by_m = balance(&owned_m, mirrors);
    let mut plan = Plan::default();
    for ((m, ps), ms) in sorted.iter().zip(by_p).zip(by_m) {
        for tp in &ps {
            plan.owners.insert(tp.clone(), m.instance.clone());
        }
        plan.members.insert(m.member_id.clone(), MemberWork { partitions: ps, mirrors: ms });
    }
    plan
}

/// Splits `items` over the members whose previous holdings are `owned` (index = member), with
/// per-member counts differing by at most 1 and as many items as possible left where they were.
fn balance<T: Ord + Clone>(owned: &[&BTreeSet<T>], items: &BTreeSet<T>) -> Vec<BTreeSet<T>> {
    let n = owned.len();
    let mut out: Vec<BTreeSet<T>> = vec![BTreeSet::new(); n];
    if n == 0 {
        return out;
    }
    // Claims on current items; the first (smallest member id) claimant wins a contested item.
    let mut claims: Vec<Vec<&T>> = vec![Vec::new(); n];
    let mut claimed: BTreeSet<&T> = BTreeSet::new();
    for (i, own) in owned.iter().enumerate() {
        for item in own.iter() {
            if items.contains(item) && claimed.insert(item) {
                claims[i].push(item);
            }
        }
    }
    // Quotas: `base` each, one more for `extra` members — those keeping the most.
    let (base, extra) = (items.len() / n, items.len() % n);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| claims[b].len().cmp(&claims[a].len()).then(a.cmp(&b)));
    let mut quota = vec![base; n];
    for &i in order.iter().take(extra) {
        quota[i] += 1;
    }
    for i in 0..n {
        for item in claims[i].iter().take(quota[i]) {
            out[i].insert((*item).clone());
        }
    }
    // The rest, in order, to the member furthest below its quota (smallest index on ties).
    let kept: BTreeSet<T> = out.iter().flatten().cloned().collect();
    for item in items.iter().filter(|i| !kept.contains(*i)) {
        let target = (0..n)
            .filter(|&i| out[i].len() < quota[i])
            .max_by(|&a, &b| (quota[a] - out[a].len()).cmp(&(quota[b] - out[b].len())).then(b.cmp(&a)))
            .expect("the quotas add up to the item count");
        out[target].insert(item.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn tp(t: &str, p: i32) -> TopicPartition {
        (t.to_string(), p)
    }

    fn member(id: &str, owned: &[TopicPartition], mirrors: &[&str]) -> MemberInput {
        MemberInput {
            member_id: id.into(),
            instance: format!("inst-{id}"),
            owned_partitions: owned.iter().cloned().collect(),
            owned_mirrors: mirrors.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn work(topics: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        topics.iter().flat_map(|(t, n)| (0..*n).map(move |p| tp(t, p))).collect()
    }

    /// Disjoint, complete, balanced, owners consistent with the per-member sets.
    fn check(members: &[MemberInput], parts: &BTreeSet<TopicPartition>, mirrors: &BTreeSet<String>, plan: &Plan) {
        let ids: BTreeSet<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
        assert_eq!(plan.members.keys().map(String::as_str).collect::<BTreeSet<_>>(), ids);
        let mut seen_p = BTreeSet::new();
        let mut seen_m = BTreeSet::new();
        for (id, w) in &plan.members {
            let inst = &members.iter().find(|m| &m.member_id == id).unwrap().instance;
            for p in &w.partitions {
                assert!(seen_p.insert(p.clone()), "{p:?} assigned twice");
                assert_eq!(plan.owners.get(p), Some(inst), "owner of {p:?}");
            }
            for m in &w.mirrors {
                assert!(seen_m.insert(m.clone()), "mirror {m} assigned twice");
            }
        }
        assert_eq!(&seen_p, parts, "every partition assigned, nothing else");
        assert_eq!(&seen_m, mirrors, "every mirror assigned, nothing else");
        assert_eq!(plan.owners.len(), parts.len());
        if !ids.is_empty() {
            let counts: Vec<usize> = plan.members.values().map(|w| w.partitions.len()).collect();
            let mcounts: Vec<usize> = plan.members.values().map(|w| w.mirrors.len()).collect();
            assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "partitions {counts:?}");
            assert!(mcounts.iter().max().unwrap() - mcounts.iter().min().unwrap() <= 1, "mirrors {mcounts:?}");
        }
    }

    #[test]
    fn fresh_group_is_balanced_and_complete() {
        let members = [member("a", &[], &[]), member("b", &[], &[]), member("c", &[], &[])];
        let parts = work(&[("m1.t", 10), ("m2.t", 10)]);
        let mirrors: BTreeSet<String> = ["m1".to_string(), "m2".to_string()].into();
        let plan = assign(&members, &parts, &mirrors);
        check(&members, &parts, &mirrors, &plan);
        let mut counts: Vec<usize> = plan.members.values().map(|w| w.partitions.len()).collect();
        counts.sort();
        assert_eq!(counts, vec![6, 7, 7]);
    }

    #[test]
    fn no_members_no_plan() {
        let plan = assign(&[], &work(&[("t", 3)]), &BTreeSet::new());
        assert_eq!(plan, Plan::default());
    }

    #[test]
    fn a_departed_members_work_is_spread_and_the_rest_stays() {
        let parts = work(&[("t", 9)]);
        let first = [member("a", &[], &[]), member("b", &[], &[]), member("c", &[], &[])];
        let p1 = assign(&first, &parts, &BTreeSet::new());
        // c leaves: a and b keep what they had and share c's three.
        let second = [
            member("a", &p1.members["a"].partitions.iter().cloned().collect::<Vec<_>>(), &[]),
            member("b", &p1.members["b"].partitions.iter().cloned().collect::<Vec<_>>(), &[]),
        ];
        let p2 = assign(&second, &parts, &BTreeSet::new());
        check(&second, &parts, &BTreeSet::new(), &p2);
        assert!(p1.members["a"].partitions.is_subset(&p2.members["a"].partitions));
        assert!(p1.members["b"].partitions.is_subset(&p2.members["b"].partitions));
    }

    #[test]
    fn a_new_member_takes_only_what_balance_needs() {
        let parts = work(&[("t", 8)]);
        let all: Vec<TopicPartition> = parts.iter().cloned().collect();
        let members = [member("a", &all[..4], &["m"]), member("b", &all[4..], &[]), member("c", &[], &[])];
        let mirrors: BTreeSet<String> = ["m".to_string()].into();
        let plan = assign(&members, &parts, &mirrors);
        check(&members, &parts, &mirrors, &plan);
        // 8 over 3 = 3,3,2: a and b each give up one, c gets exactly those two.
        assert_eq!(plan.members["c"].partitions.len(), 2);
        assert_eq!(plan.members["a"].partitions.len(), 3);
        assert!(plan.members["a"].partitions.iter().all(|p| all[..4].contains(p)));
        assert!(plan.members["b"].partitions.iter().all(|p| all[4..].contains(p)));
        assert_eq!(plan.members["a"].mirrors, mirrors, "the mirror stays with its owner");
    }

    #[test]
    fn contested_and_stale_claims_resolve_deterministically() {
        let parts = work(&[("t", 4)]);
        // Both claim t-0; a claims a partition that no longer exists.
        let members = [member("b", &[tp("t", 0)], &[]), member("a", &[tp("t", 0), tp("gone", 0)], &[])];
        let plan = assign(&members, &parts, &BTreeSet::new());
        check(&members, &parts, &BTreeSet::new(), &plan);
        assert!(plan.members["a"].partitions.contains(&tp("t", 0)));
        let reversed = [members[1].clone(), members[0].clone()];
        assert_eq!(assign(&reversed, &parts, &BTreeSet::new()), plan, "input order does not matter");
    }

    #[test]
    fn random_inputs_are_disjoint_complete_balanced_and_sticky() {
        let mut rng = StdRng::seed_from_u64(0x6d69_7272_6f72);
        for round in 0..500 {
            let n_members = rng.random_range(1..8);
            let n_topics = rng.random_range(0..6);
            let topics: Vec<(String, i32)> =
                (0..n_topics).map(|t| (format!("t{t}"), rng.random_range(1..20))).collect();
            let parts: BTreeSet<TopicPartition> =
                topics.iter().flat_map(|(t, n)| (0..*n).map(move |p| (t.clone(), p))).collect();
            let mirrors: BTreeSet<String> = (0..rng.random_range(0..5)).map(|m| format!("m{m}")).collect();
            // Previous holdings: random, possibly overlapping, possibly stale.
            let mut members = Vec::new();
            for i in 0..n_members {
                let stale = rng.random_bool(0.2).then(|| ("old".to_string(), 0));
                let owned_partitions =
                    parts.iter().filter(|_| rng.random_bool(1.0 / n_members as f64)).cloned().chain(stale).collect();
                let owned_mirrors = mirrors.iter().filter(|_| rng.random_bool(0.4)).cloned().collect();
                members.push(MemberInput {
                    member_id: format!("mg-{}", rng.random_range(0..1000) * 10 + i),
                    instance: format!("i{i}"),
                    owned_partitions,
                    owned_mirrors,
                });
            }
            let plan = assign(&members, &parts, &mirrors);
            check(&members, &parts, &mirrors, &plan);
            // Stable: assigning the plan's own result again changes nothing.
            let again: Vec<MemberInput> = members
                .iter()
                .map(|m| MemberInput {
                    owned_partitions: plan.members[&m.member_id].partitions.clone(),
                    owned_mirrors: plan.members[&m.member_id].mirrors.clone(),
                    ..m.clone()
                })
                .collect();
            assert_eq!(assign(&again, &parts, &mirrors), plan, "round {round}: a balanced plan is kept as is");
            // Sticky: each member keeps at least min(its winning claims, the smaller quota).
            let mut sorted: Vec<&MemberInput> = members.iter().collect();
            sorted.sort_by(|a, b| a.member_id.cmp(&b.member_id));
            let mut taken = BTreeSet::new();
            let base = parts.len() / members.len();
            for m in sorted {
                let wins =
                    m.owned_partitions.iter().filter(|p| parts.contains(*p) && taken.insert((*p).clone())).count();
                let kept = plan.members[&m.member_id].partitions.intersection(&m.owned_partitions).count();
                assert!(kept >= wins.min(base), "round {round}: {} kept {kept} of {wins}", m.member_id);
            }
        }
    }
}
