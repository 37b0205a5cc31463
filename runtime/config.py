"""Configuration (DESIGN §10): data models.

SKELETON: the models are fixed; loading (files, environment, precedence, errors naming file,
line and key) is being implemented below them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Defaults(_Config):
    model: str | None = None
    """Model reference for new runs; None means: Claude when ANTHROPIC_API_KEY is set, else demo."""
    agent: str = "default"
    theme: str | None = None
    auto_resume: bool = False
    max_steps: int = Field(default=50, ge=1, le=10_000)
    job_step_budget: int = Field(default=200, ge=1)
    """Steps all runs of one job may take together (stops runaway delegation chains)."""
    max_parallel_tools: int = Field(default=4, ge=1, le=64)


class AgentConfig(_Config):
    instructions: str = ""
    model: str | None = None
    tools: list[str] | None = None
    """Tool names or patterns this agent may use; None means every tool."""
    delegates: list[str] = []
    max_steps: int | None = Field(default=None, ge=1)
    description: str = ""
    """What the agent does, shown to parents that may delegate to it."""


class StdioServerConfig(_Config):
    type: Literal["stdio"] = "stdio"
    command: str
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    timeout: float = Field(default=60.0, gt=0)
    """Seconds one tool call may take before the server is considered hung."""


class HttpServerConfig(_Config):
    type: Literal["http"] = "http"
    url: str
    headers: dict[str, str] = {}
    timeout: float = Field(default=60.0, gt=0)


McpServerConfig = Annotated[StdioServerConfig | HttpServerConfig, Field(discriminator="type")]


class Permissions(_Config):
    allow: list[str] = []
    ask: list[str] = []
    deny: list[str] = []


class Config(_Config):
    defaults: Defaults = Defaults()
    agents: dict[str, AgentConfig] = {}
    mcp_servers: dict[str, McpServerConfig] = {}
    permissions: Permissions = Permissions()
    sources: list[str] = []
    """The files this config was read from, in order (later ones won)."""
