//! The churn: Cinder slots acted on in turn, each action the next of the slot's cycle (update
//! the spec, rotate the database password, delete the Cinder with its backends and Secrets and
//! create its successor under a new name). New names (and database names, so new device locks)
//! on every re-creation make a map keyed by name that is never pruned grow with the run.

use anyhow::Context as _;
use cinder_e2e::bench_cluster::{create_bench_cinder, credential_secrets};
use cinder_e2e::{NS, put_secret};
use cinder_operator::crd::{Cinder, CinderBackend};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};

/// One churn action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A spec change that rolls the services (an extraConfig value).
    UpdateSpec,
    /// A new database password in the credential Secret.
    RotateSecret,
    /// The Cinder, its backends and Secrets deleted; its successor created.
    Recreate,
}

/// Attempts of one action while the connection fails.
const ATTEMPTS: u32 = 3;

/// Whether `e` is the connection to the API server failing (not an answer of it).
fn is_connection_error(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<kube::Error>(),
            Some(kube::Error::Service(_) | kube::Error::HyperError(_))
        )
    })
}

/// The cycle every slot goes through.
const CYCLE: [Action; 3] = [Action::UpdateSpec, Action::RotateSecret, Action::Recreate];

/// The `tick`-th action of the churn over `slots` slots: which slot and what (slot by slot,
/// each slot one step further through [`CYCLE`] per round).
pub fn action_at(tick: u64, slots: u32) -> (u32, Action) {
    let slots = u64::from(slots.max(1));
    let slot = (tick % slots) as u32;
    let round = tick / slots;
    (slot, CYCLE[(round % CYCLE.len() as u64) as usize])
}

/// The name of slot `slot`'s Cinder in its `generation`-th life.
pub fn cinder_name(slot: u32, generation: u32) -> String {
    format!("soak{slot:03}-g{generation}")
}

/// The Cinders of the churn and what happened to them.
pub struct Churn {
    client: Client,
    backends: u32,
    generations: Vec<u32>,
    /// Actions taken per slot (spec updates and rotations count through it too).
    actions: Vec<u64>,
    pub recreated: u64,
    pub updated: u64,
    pub rotated: u64,
    /// Actions that failed (reported, not repeated: the slot's next action goes on from there).
    pub failed: u64,
}

impl Churn {
    /// Creates the first generation of `slots` Cinders.
    pub async fn start(client: &Client, slots: u32, backends: u32) -> anyhow::Result<Churn> {
        let churn = Churn {
            client: client.clone(),
            backends,
            generations: vec![0; slots as usize],
            actions: vec![0; slots as usize],
            recreated: 0,
            updated: 0,
            rotated: 0,
            failed: 0,
        };
        for slot in 0..slots {
            churn.create(slot).await?;
        }
        Ok(churn)
    }

    fn name(&self, slot: u32) -> String {
        cinder_name(slot, self.generations[slot as usize])
    }

    async fn create(&self, slot: u32) -> anyhow::Result<()> {
        let name = self.name(slot);
        create_bench_cinder(
            &self.client,
            &name,
            self.backends,
            None,
            "soak-db-0",
            serde_json::json!({
                "database": {"database": name.replace('-', "_")},
                "extraConfig": {"DEFAULT": {"debug": "false"}},
            }),
        )
        .await
        .with_context(|| format!("creating {name}"))
    }

    /// Carries out the `tick`-th action, repeating it (up to [`ATTEMPTS`] times) while the
    /// connection to the API server fails; a failure left after that (or another one, a name
    /// already gone) is printed and counted, and the churn goes on.
    pub async fn act(&mut self, tick: u64) {
        for attempt in 1..=ATTEMPTS {
            match self.try_act(tick).await {
                Ok(()) => return,
                Err(e) if attempt < ATTEMPTS && is_connection_error(&e) => {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Err(e) => {
                    eprintln!("soakbench: churn action {tick} failed: {e:#}");
                    self.failed += 1;
                    return;
                }
            }
        }
    }

    async fn try_act(&mut self, tick: u64) -> anyhow::Result<()> {
        let (slot, action) = action_at(tick, self.generations.len() as u32);
        let name = self.name(slot);
        let n = self.actions[slot as usize];
        self.actions[slot as usize] += 1;
        match action {
            Action::UpdateSpec => {
                let debug = if n.is_multiple_of(2) { "true" } else { "false" };
                let patch =
                    serde_json::json!({"spec": {"extraConfig": {"DEFAULT": {"debug": debug}}}});
                Api::<Cinder>::namespaced(self.client.clone(), NS)
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .with_context(|| format!("updating {name}"))?;
                self.updated += 1;
            }
            Action::RotateSecret => {
                let [db, _, _] = credential_secrets(&name);
                put_secret(
                    &self.client,
                    &db,
                    &[
                        ("username", "cinder"),
                        ("password", &format!("soak-db-{n}")),
                    ],
                )
                .await
                .with_context(|| format!("rotating {db}"))?;
                self.rotated += 1;
            }
            Action::Recreate => {
                self.delete(&name).await?;
                self.generations[slot as usize] += 1;
                self.create(slot).await?;
                self.recreated += 1;
            }
        }
        Ok(())
    }

    /// Deletes Cinder `name`, its backends and its credential Secrets (without waiting for
    /// the finalizers; what is gone already is no error, so a failed action can be repeated).
    async fn delete(&self, name: &str) -> anyhow::Result<()> {
        let backends: Api<CinderBackend> = Api::namespaced(self.client.clone(), NS);
        for b in 0..self.backends {
            delete_if_present(&backends, &format!("{name}-nfs{b}")).await?;
        }
        delete_if_present(&Api::<Cinder>::namespaced(self.client.clone(), NS), name).await?;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NS);
        for s in credential_secrets(name) {
            delete_if_present(&secrets, &s).await?;
        }
        Ok(())
    }
}

/// Deletes `name` unless it is gone already.
async fn delete_if_present<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_walks_the_cycle_in_turn() {
        let seen: Vec<_> = (0..6).map(|t| action_at(t, 2)).collect();
        assert_eq!(
            seen,
            vec![
                (0, Action::UpdateSpec),
                (1, Action::UpdateSpec),
                (0, Action::RotateSecret),
                (1, Action::RotateSecret),
                (0, Action::Recreate),
                (1, Action::Recreate),
            ]
        );
        assert_eq!(action_at(6, 2), (0, Action::UpdateSpec));
        assert_eq!(cinder_name(3, 12), "soak003-g12");
    }
}
