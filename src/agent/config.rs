//! `openclaw.json`, written as ClawGym-RL writes it for one task: a local Gateway on loopback
//! with token auth, the `coding` tool profile, one model provider (`api = openai-completions`)
//! pointed at the trainer's endpoint, and no bootstrap files in the workspace.

use serde_json::{Value, json};

use super::model_url::ModelUrl;

/// The provider's name in `models.providers` (models are `envcraft/<model>`).
pub const PROVIDER: &str = "envcraft";

/// The Gateway's port inside the sandbox (OpenClaw's default). `openclaw agent --local` runs
/// the agent embedded and starts no Gateway; the section is there so that the same config
/// serves a Gateway, as in ClawGym-RL.
pub const GATEWAY_PORT: u16 = 18789;

/// What goes into one task's config.
#[derive(Debug, Clone)]
pub struct ConfigInput<'a> {
    pub model_url: &'a ModelUrl,
    /// The model id as the endpoint knows it (`model` of each request).
    pub model: &'a str,
    /// The workspace as OpenClaw sees it (`/root/.openclaw/workspace`).
    pub workspace: &'a str,
    /// The Gateway's token (random per session).
    pub gateway_token: &'a str,
    /// Seconds a model request may take (connect, headers, body).
    pub model_timeout_secs: u64,
}

/// The config, as JSON (OpenClaw reads JSON5, of which JSON is a subset).
pub fn openclaw_json(input: &ConfigInput<'_>) -> Value {
    json!({
        "gateway": {
            "mode": "local",
            "bind": "loopback",
            "port": GATEWAY_PORT,
            "auth": {"mode": "token", "token": input.gateway_token},
        },
        "tools": {"profile": "coding"},
        "models": {
            "mode": "merge",
            "providers": {
                PROVIDER: {
                    "baseUrl": input.model_url.to_string(),
                    // A local marker, not a secret: OpenClaw accepts one for a loopback URL.
                    "apiKey": "envcraft-local",
                    "api": "openai-completions",
                    "timeoutSeconds": input.model_timeout_secs,
                    "models": [{
                        "id": input.model,
                        "name": input.model,
                        "reasoning": false,
                        "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": 128000,
                        "maxTokens": 8192,
                    }],
                },
            },
        },
        "agents": {
            "defaults": {
                "model": {"primary": format!("{PROVIDER}/{}", input.model)},
                "workspace": input.workspace,
                // No AGENTS.md, SOUL.md, BOOTSTRAP.md, ... in the workspace: the verifier
                // judges the agent's work, not the harness's.
                "skipBootstrap": true,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_config_points_one_provider_at_the_url_and_skips_bootstrap() {
        let url = ModelUrl::parse("http://localhost:8000/v1").unwrap();
        let config = openclaw_json(&ConfigInput {
            model_url: &url,
            model: "qwen",
            workspace: "/root/.openclaw/workspace",
            gateway_token: "abc",
            model_timeout_secs: 300,
        });
        assert_eq!(config["gateway"]["bind"], "loopback");
        assert_eq!(config["gateway"]["auth"]["mode"], "token");
        assert_eq!(config["gateway"]["auth"]["token"], "abc");
        assert_eq!(config["tools"]["profile"], "coding");
        let provider = &config["models"]["providers"]["envcraft"];
        assert_eq!(provider["api"], "openai-completions");
        assert_eq!(provider["baseUrl"], "http://127.0.0.1:8000/v1");
        assert_eq!(provider["models"][0]["id"], "qwen");
        assert_eq!(
            config["agents"]["defaults"]["model"]["primary"],
            "envcraft/qwen"
        );
        assert_eq!(config["agents"]["defaults"]["skipBootstrap"], true);
        assert_eq!(
            config["agents"]["defaults"]["workspace"],
            "/root/.openclaw/workspace"
        );
    }
}
