//! `mcp-root admin hub …` and `admin skill …`: enrol targets, rotate their keys, list them
//! (filters and selectors); label, cordon, uncordon, retire and narrow them; switch a
//! target's `infra_access_skill`.

use serde_json::json;

use super::client::{AdminClient, lines_or, page_footer, page_query, print, segment};
use super::commands::{HubCommand, LifecycleArgs, SkillCmd};
use crate::api::bodies::{
    Audited, EnrollRequest, Enrolled, KeyRotated, LabelsRequest, LifecycleRequest,
    NarrowingRequest, PlacementRequest, RotateKeyRequest, SkillAnswer, TargetList, TargetStanding,
    TargetView,
};

/// Runs one hub command.
pub(super) async fn run(c: &AdminClient, cmd: HubCommand) -> anyhow::Result<()> {
    match cmd {
        HubCommand::Enroll {
            target,
            environment,
            subnet,
            zone,
            labels,
            json,
        } => {
            let ask = EnrollRequest {
                target_id: target,
                environment,
                subnet_id: subnet,
                zone,
                labels: (!labels.is_empty()).then(|| labels.into_iter().collect()),
            };
            let enrolled: Audited<Enrolled> = c.post("/v1/root/hubs", &ask).await?;
            print(json, &enrolled, |e| {
                format!(
                    "target_id: {}\ntoken:     {}  (shown once; give it to the hub as its token file)",
                    e.item.target_id, e.item.token
                )
            });
        }
        HubCommand::RotateKey {
            target,
            grace_sec,
            token_file,
            json,
        } => {
            let mut rotated: Audited<KeyRotated> = c
                .post(
                    &format!("/v1/root/hubs/{}/rotate-key", segment(&target)?),
                    &RotateKeyRequest { grace_sec },
                )
                .await?;
            if let Some(path) = &token_file {
                crate::secrets::write_private_file(path, &format!("{}\n", rotated.item.token))?;
                rotated.item.token = format!("written to {}", path.display());
            }
            print(json, &rotated, |r| {
                format!(
                    "target_id: {}\ntoken:     {}  (shown once; replace the hub's token file with it)\nprevious token and key valid until {}",
                    r.item.target_id, r.item.token, r.item.previous_valid_until
                )
            });
        }
        HubCommand::List {
            environment,
            subnet,
            zone,
            status,
            skill,
            matching,
            lifecycle,
            label,
            selector,
            page,
            json,
        } => {
            let filters = vec![
                ("environment", environment),
                ("subnet_id", subnet),
                ("zone", zone),
                ("status", status),
                ("skill", skill),
                ("q", matching),
                ("lifecycle", lifecycle),
                ("label", label),
                ("selector", selector),
            ];
            let mut list: TargetList = c
                .get_query("/v1/root/hubs", &page_query(filters.clone(), &page, None))
                .await?;
            while page.all
                && let Some(next) = list.next_cursor.take()
            {
                let more: TargetList = c
                    .get_query(
                        "/v1/root/hubs",
                        &page_query(filters.clone(), &page, Some(next)),
                    )
                    .await?;
                list.targets.extend(more.targets);
                list.next_cursor = more.next_cursor;
            }
            print(json, &list, |l| {
                let footer = page_footer(
                    l.targets.len(),
                    l.total,
                    &l.by_status,
                    l.next_cursor.as_deref(),
                );
                let lines = lines_or(l.targets.iter().map(target_line).collect(), "no targets");
                format!("{lines}\n{footer}")
            });
        }
        HubCommand::Label {
            target,
            set,
            remove,
            json,
        } => {
            let ask = LabelsRequest {
                set: set.into_iter().collect(),
                remove,
            };
            let answer: Audited<TargetStanding> = c
                .post(&format!("/v1/root/hubs/{}/labels", segment(&target)?), &ask)
                .await?;
            print(json, &answer, |a| standing_text(&a.item));
        }
        HubCommand::Cordon(a) => lifecycle(c, "cordon", a).await?,
        HubCommand::Uncordon(a) => lifecycle(c, "uncordon", a).await?,
        HubCommand::Retire(a) => lifecycle(c, "retire", a).await?,
        HubCommand::Move {
            target,
            environment,
            subnet,
            json,
        } => {
            let answer: Audited<TargetStanding> = c
                .post(
                    &format!("/v1/root/hubs/{}/placement", segment(&target)?),
                    &PlacementRequest {
                        environment,
                        subnet_id: subnet,
                    },
                )
                .await?;
            print(json, &answer, |a| standing_text(&a.item));
        }
        HubCommand::Narrow {
            target,
            read_only,
            deny,
            json,
        } => {
            let answer: Audited<TargetStanding> = c
                .post(
                    &format!("/v1/root/hubs/{}/narrowing", segment(&target)?),
                    &NarrowingRequest { read_only, deny },
                )
                .await?;
            print(json, &answer, |a| standing_text(&a.item));
        }
    }
    Ok(())
}

async fn lifecycle(c: &AdminClient, command: &str, a: LifecycleArgs) -> anyhow::Result<()> {
    let answer: Audited<TargetStanding> = c
        .post(
            &format!("/v1/root/hubs/{}/lifecycle/{command}", segment(&a.target)?),
            &LifecycleRequest { reason: a.reason },
        )
        .await?;
    print(a.json, &answer, |a| standing_text(&a.item));
    Ok(())
}

/// A target's labels, lifecycle and narrowing as the admin CLI prints them.
fn standing_text(s: &TargetStanding) -> String {
    let labels = labels_text(&s.labels);
    let mut state = s.lifecycle.state.as_str().to_owned();
    if let Some(by) = &s.lifecycle.changed_by {
        state.push_str(&format!(" (by {by}"));
        if let Some(r) = &s.lifecycle.reason {
            state.push_str(&format!(": {r}"));
        }
        state.push(')');
    }
    let narrowing = match (s.narrowing.read_only, s.narrowing.deny.is_empty()) {
        (false, true) => "nothing denied".to_owned(),
        (true, true) => "read-only".to_owned(),
        (ro, false) => format!(
            "{}denied: {}",
            if ro { "read-only; " } else { "" },
            s.narrowing.deny.join(", ")
        ),
    };
    let mut out = format!(
        "{} (env={}, subnet={})\n  lifecycle: {state}\n  labels:    {labels}\n  narrowing: {narrowing}",
        s.target_id, s.environment, s.subnet_id
    );
    if let Some(n) = s.leases_ended {
        out.push_str(&format!("\n  leases ended: {n}"));
    }
    out
}

fn labels_text(labels: &crate::hubs::lifecycle::Labels) -> String {
    if labels.is_empty() {
        return "none".to_owned();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn target_line(t: &TargetView) -> String {
    let mut line = format!(
        "{}  {:8}  env={}  last_seen={}  published={}",
        t.target_id,
        t.status.as_str(),
        t.environment,
        t.last_seen_at.as_deref().unwrap_or("never"),
        t.published_capabilities.len()
    );
    if t.lifecycle.state != crate::hubs::lifecycle::State::Active {
        line.push_str(&format!("  {}", t.lifecycle.state.as_str()));
    }
    if !t.labels.is_empty() {
        line.push_str(&format!("  labels={}", labels_text(&t.labels)));
    }
    line
}

/// Runs one skill command.
pub(crate) async fn skill(c: &AdminClient, command: SkillCmd) -> anyhow::Result<()> {
    let (verb, a) = match command {
        SkillCmd::Install(a) => ("install", a),
        SkillCmd::Enable(a) => ("enable", a),
        SkillCmd::Disable(a) => ("disable", a),
        SkillCmd::Uninstall(a) => ("uninstall", a),
        SkillCmd::Status(a) => ("status", a),
    };
    let answer: Audited<SkillAnswer> = c
        .post(
            &format!(
                "/v1/root/hubs/{}/skills/{}/{verb}",
                segment(&a.target)?,
                segment(&a.skill)?
            ),
            &json!({}),
        )
        .await?;
    print(a.json, &answer, |a| skill_text(&a.item));
    Ok(())
}

/// A target's skill as the admin CLI prints it.
fn skill_text(answer: &SkillAnswer) -> String {
    let s = &answer.skill;
    let word = |b: bool, yes: &'static str, no: &'static str| if b { yes } else { no };
    let mut out = format!(
        "{} on {}: {} and {} by root ({}), {}",
        s.skill,
        answer.target_id,
        word(s.desired.installed, "installed", "uninstalled"),
        word(s.desired.enabled, "enabled", "disabled"),
        s.desired.changed_by.as_deref().unwrap_or("never changed"),
        word(s.open, "callable", "not callable"),
    );
    if let Some(why) = &s.closed_because {
        out.push_str(&format!(": {why}"));
    }
    match &s.hub {
        Some(h) => out.push_str(&format!(
            "\nhub reports: version {}, {} published of {} tools{}",
            h.version.as_deref().unwrap_or("?"),
            h.published.len(),
            h.adapters.len(),
            if s.owner_disabled {
                ", switched off by the hub's owner"
            } else {
                ""
            },
        )),
        None => out.push_str("\nthe hub has never connected"),
    }
    if let Some(p) = &s.hub_push {
        out.push_str(&format!("\n{p}"));
    }
    out
}
