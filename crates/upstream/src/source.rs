//! One description per upstream source: everything sessionwatch knows about a coding agent's CLI in one
//! `static` ([`Source`]), defined next to that source's reader (`claude::SOURCE`, `codex::SOURCE`, …).
//!
//! Adding a source: a [`CatalogId`] variant, then the compiler points at [`CatalogId::source`] and
//! [`HookCli::catalog`] (exhaustive matches), and the new module's `SOURCE` must fill every field below.

use crate::hook::{HookCli, HookEvent};
use crate::{Adoption, CatalogEntry, CatalogId, CheckOutcome, Homes, Probe, UpstreamError};
use std::path::{Path, PathBuf};

/// Discovery's second half: the catalog entries of the candidates, calling `step` once per candidate.
pub type EntriesFn = fn(&Homes, &[PathBuf], &mut dyn FnMut()) -> Vec<CatalogEntry>;
/// Adoption of a session found in the homes.
pub type AdoptFn = fn(&Homes, &str) -> Result<Adoption, UpstreamError>;
/// Adoption of the transcript (or database) a hook names.
pub type AdoptTranscriptFn = fn(&Path, &str) -> Result<Adoption, UpstreamError>;
/// One tick for one link.
pub type CheckFn = fn(&Probe<'_>) -> CheckOutcome;
/// One tick for many links, in order.
pub type CheckManyFn = fn(&[Probe<'_>]) -> Vec<CheckOutcome>;

/// An upstream source: its names, catalog, adoption, tick check, hooks and installer.
pub struct Source {
    pub id: CatalogId,
    /// The catalog's name (`catalog_id` in the store, the part of an adopted session key).
    pub name: &'static str,
    /// Other names [`CatalogId::parse`] accepts (lower case).
    pub aliases: &'static [&'static str],
    /// The `upstream_kind` stored with a link.
    pub upstream_kind: &'static str,
    /// Discovery: the files or databases to examine (one progress step each). Never writes.
    pub candidates: fn(&Homes) -> Vec<PathBuf>,
    /// Discovery: the catalog entries of `candidates`; calls `step` once per candidate examined.
    pub entries: EntriesFn,
    /// Adoption and the tick check of its links.
    pub links: LinkOps,
    pub hook: HookSpec,
    /// How `sessionwatch hooks install` puts the hooks in place.
    pub installer: Installer,
    /// The CLI version we test against (`major.minor`, tests/agents): `doctor` warns on another.
    pub tested_version: &'static str,
}

/// How a source adopts sessions and checks its links.
pub struct LinkOps {
    /// Finds a session in the homes and links it with a baseline marker at its current end.
    pub adopt: AdoptFn,
    /// Adopts the transcript (or database) a hook names; a JSONL file may not exist yet.
    pub adopt_transcript: AdoptTranscriptFn,
    /// One tick for one link.
    pub check: CheckFn,
    /// One tick for many links, in order, when the source batches them (`None`: `check` for each link,
    /// `check_each`); a panic costs only its links.
    pub check_many: Option<CheckManyFn>,
}

impl LinkOps {
    /// A source that checks each link on its own (one file per link).
    pub const fn unbatched(adopt: AdoptFn, adopt_transcript: AdoptTranscriptFn, check: CheckFn) -> LinkOps {
        LinkOps { adopt, adopt_transcript, check, check_many: None }
    }

    /// One tick for many links, in order; a panic costs only its links.
    pub(crate) fn check_many(&self, probes: &[Probe<'_>]) -> Vec<CheckOutcome> {
        match self.check_many {
            Some(batched) => batched(probes),
            None => check_each(self.check, probes),
        }
    }
}

/// A source's hooks (or plugin/extension posting the same shapes).
pub struct HookSpec {
    pub cli: HookCli,
    /// Other names [`HookCli::parse`] accepts (lower case).
    pub aliases: &'static [&'static str],
    /// The events installed (`hooks install`, `setup`, `doctor`).
    pub installed: &'static [HookEvent],
    /// The events accepted from this CLI (a superset of `installed`).
    pub accepted: &'static [HookEvent],
    /// The hook input field carrying the turn's id the transcript also holds (`None`: the CLI gives none).
    pub turn_id_field: Option<&'static str>,
}

/// How the hooks get installed; the binary's `hooks install` dispatches on this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Installer {
    /// Command hooks merged into the CLI's JSON settings file.
    Settings(SettingsHooks),
    /// One plain JS plugin file in OpenCode's plugin folder.
    OpenCodePlugin,
    /// One TypeScript extension file in Pi's extensions folder.
    PiExtension,
}

/// Where a CLI's hook settings live and the dialect it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettingsHooks {
    /// `--scope user`: `$<env>/<under_env>` when the variable is set, else `~/<under_home>`.
    pub user_env: &'static str,
    pub under_env: &'static str,
    pub under_home: &'static str,
    /// `--scope project`: relative to the project directory.
    pub project: &'static str,
    /// The CLI strips comments before it parses (JSONC); otherwise strict JSON.
    pub comments: bool,
    /// Handlers carry a `name`, and `timeout` counts milliseconds (Gemini).
    pub named_handlers_ms: bool,
    /// The CLI runs only hooks trusted with its own binary (Codex).
    pub trust: bool,
}

impl CatalogId {
    /// This source's description: the one place a new source is listed.
    pub fn source(self) -> &'static Source {
        match self {
            CatalogId::Claude => &crate::claude::SOURCE,
            CatalogId::Codex => &crate::codex::SOURCE,
            CatalogId::OpenCode => &crate::opencode::SOURCE,
            CatalogId::Pi => &crate::pi::SOURCE,
            CatalogId::Gemini => &crate::gemini::SOURCE,
        }
    }
}

/// Every source's description, in [`CatalogId::ALL`] order.
pub fn all() -> impl Iterator<Item = &'static Source> {
    CatalogId::ALL.into_iter().map(CatalogId::source)
}

/// Each file is one entry (`entry_for`), one progress step each.
pub(crate) fn entries_per_file(
    files: &[PathBuf],
    step: &mut dyn FnMut(),
    entry_for: impl Fn(&Path) -> Option<CatalogEntry>,
) -> Vec<CatalogEntry> {
    let mut out = Vec::new();
    for f in files {
        out.extend(entry_for(f));
        step();
    }
    out
}

/// Runs `check` for each probe in order; a panic costs only that probe's link.
fn check_each(check: CheckFn, probes: &[Probe<'_>]) -> Vec<CheckOutcome> {
    probes
        .iter()
        .map(|probe| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(probe)))
                .unwrap_or_else(|_| CheckOutcome::Inconclusive("classifier panicked".into()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every source's description is complete and consistent.
    #[test]
    fn every_source_is_described_consistently() {
        let pins = [
            include_str!("../../../tests/agents/package.json"),
            include_str!("../../../tests/agents/install.sh"),
        ]
        .concat();
        let mut names = std::collections::BTreeSet::new();
        for c in CatalogId::ALL {
            let s = c.source();
            assert_eq!(s.id, c, "{c:?}'s description is another source's");
            assert!(names.insert(s.name), "{} listed twice", s.name);
            for n in [s.name, s.upstream_kind].iter().chain(s.aliases) {
                assert_eq!(CatalogId::parse(n), Some(c), "{n:?} does not parse back to {c:?}");
                assert_eq!(CatalogId::parse(&n.to_ascii_uppercase()), Some(c));
            }
            assert_eq!(c.as_str(), s.name);
            assert_eq!(c.upstream_kind(), s.upstream_kind);
            // The hook CLI maps back to this catalog, under the same name.
            let h = s.hook.cli;
            assert_eq!(h.catalog(), c, "{h:?} maps to another catalog");
            assert!(std::ptr::eq(h.source(), s));
            assert_eq!(h.as_str(), s.name);
            for n in std::iter::once(&s.name).chain(s.hook.aliases) {
                assert_eq!(HookCli::parse(n), Some(h), "{n:?} does not parse back to {h:?}");
            }
            assert!(HookCli::ALL.contains(&h), "{h:?} missing from HookCli::ALL");
            assert!(!s.hook.installed.is_empty(), "{c:?} installs no hook events");
            for e in s.hook.installed {
                assert!(h.accepts(*e), "{c:?} installs {e:?} but does not accept it");
            }
            // An installer, with paths that name files.
            match s.installer {
                Installer::Settings(f) => {
                    for p in [f.under_env, f.under_home, f.project] {
                        assert!(p.ends_with(".json") && !p.starts_with('/'), "{c:?}: {p:?}");
                    }
                    assert!(!f.user_env.is_empty());
                }
                Installer::OpenCodePlugin => assert_eq!(c, CatalogId::OpenCode),
                Installer::PiExtension => assert_eq!(c, CatalogId::Pi),
            }
            // A pinned version row: `major.minor`, the one tests/agents installs.
            let parts: Vec<&str> = s.tested_version.split('.').collect();
            assert!(
                parts.len() == 2
                    && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())),
                "{c:?}: tested version {:?} is not major.minor",
                s.tested_version
            );
            assert!(
                pins.contains(&format!("\"{}.", s.tested_version)),
                "{c:?}: {} is not the version tests/agents installs",
                s.tested_version
            );
        }
        assert_eq!(HookCli::ALL.len(), CatalogId::ALL.len());
        assert_eq!(all().count(), CatalogId::ALL.len());
    }
}
