"""LLM roles (prompt/output token shapes) and tool profiles used to build templates.

Token lengths come from the production traces of :mod:`scalesched.workload.tokens`
(medians: conv_prompt 1020, conv_output 129, code_prompt 1469, code_output 13); a role
scales one trace distribution and clips it so prompt + output fit the context window of
the model the role is meant for (phi-2: 2048 tokens, llama-2-7b/70b: 4096,
codellama-34b: 16384).  The estimate a scheduler sees is ``median × scale`` clipped the
same way (column *est*).

=========== ============== ============================== ============================= =====
role        meant for      prompt                         output                        est
=========== ============== ============================== ============================= =====
router      phi-2          conv_prompt ×0.5 [16, 1536]    conv_output ×0.04 [1, 16]     5
voter       phi-2          conv_prompt ×1.0 [64, 1536]    conv_output ×0.05 [1, 16]     6
planner     llama-2-70b    conv_prompt ×1.0 [64, 3072]    conv_output ×2.0 [64, 1024]   258
reasoner    llama-2-70b    conv_prompt ×1.0 [64, 3072]    conv_output ×0.6 [16, 512]    77
joiner      llama-2-70b    conv_prompt ×1.5 [128, 3072]   conv_output ×1.0 [16, 1024]   129
judge       llama-2-70b    conv_prompt ×2.0 [128, 3584]   conv_output ×0.5 [8, 512]     64
synthesiser llama-2-70b    conv_prompt ×2.5 [256, 3072]   conv_output ×3.0 [128, 1024]  387
worker      llama-2-7b     conv_prompt ×1.0 [32, 3072]    conv_output ×1.0 [8, 1024]    129
reader      llama-2-7b     conv_prompt ×2.0 [256, 3584]   conv_output ×0.8 [16, 512]    103
summariser  llama-2-7b     conv_prompt ×2.0 [256, 3584]   conv_output ×1.0 [16, 512]    129
answer      llama-2-7b     conv_prompt ×1.5 [64, 3072]    conv_output ×1.5 [16, 1024]   194
debater     llama-2-7b/34b conv_prompt ×1.0 [64, 3072]    conv_output ×1.5 [32, 1024]   194
coder       codellama-34b  code_prompt ×1.0 [64, 12288]   code_output ×24 [32, 4096]    312
=========== ============== ============================== ============================= =====

Tool profiles (core-seconds of CPU work on a speed-1.0 core; external latency in seconds,
which no server speeds up): web search and database queries are mostly waiting on a
remote service, code execution and retrieval (embedding + vector search on local cores)
are mostly CPU.

=========== ========================================= ==========================================
tool        cpu_work                                  ext_latency
=========== ========================================= ==========================================
web_search  lognormal(median 0.08, σ 0.4) [0.05, 0.5] lognormal(median 0.6, σ 0.5) [0.2, 2.0]
db_query    lognormal(median 0.1, σ 0.5) [0.05, 1.0]  lognormal(median 0.35, σ 0.6) [0.2, 2.0]
retrieval   lognormal(median 0.4, σ 0.5) [0.05, 3.0]  0
code_exec   lognormal(median 1.0, σ 0.8) [0.05, 5.0]  0
file_io     lognormal(median 0.1, σ 0.5) [0.05, 1.0]  lognormal(median 0.05, σ 0.5) [0.0, 0.5]
=========== ========================================= ==========================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scalesched.errors import InputError
from scalesched.workload.template import (
    LogNormal,
    Num,
    TaskTemplate,
    TokenSpec,
    ToolChoice,
    ToolOption,
)


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    model: str
    """The model the role is sized for (its context window bounds the clips)."""
    prompt: TokenSpec
    output: TokenSpec


def _role(
    name: str, model: str, p: tuple[str, float, int, int], o: tuple[str, float, int, int]
) -> Role:
    return Role(name, model, TokenSpec(p[0], p[1], p[2], p[3]), TokenSpec(o[0], o[1], o[2], o[3]))


ROLES: dict[str, Role] = {
    r.name: r
    for r in (
        _role("router", "phi-2", ("conv_prompt", 0.5, 16, 1536), ("conv_output", 0.04, 1, 16)),
        _role("voter", "phi-2", ("conv_prompt", 1.0, 64, 1536), ("conv_output", 0.05, 1, 16)),
        _role(
            "planner", "llama-2-70b", ("conv_prompt", 1.0, 64, 3072), ("conv_output", 2.0, 64, 1024)
        ),
        _role(
            "reasoner", "llama-2-70b", ("conv_prompt", 1.0, 64, 3072), ("conv_output", 0.6, 16, 512)
        ),
        _role(
            "joiner", "llama-2-70b", ("conv_prompt", 1.5, 128, 3072), ("conv_output", 1.0, 16, 1024)
        ),
        _role(
            "judge", "llama-2-70b", ("conv_prompt", 2.0, 128, 3584), ("conv_output", 0.5, 8, 512)
        ),
        _role(
            "synthesiser",
            "llama-2-70b",
            ("conv_prompt", 2.5, 256, 3072),
            ("conv_output", 3.0, 128, 1024),
        ),
        _role(
            "worker", "llama-2-7b", ("conv_prompt", 1.0, 32, 3072), ("conv_output", 1.0, 8, 1024)
        ),
        _role(
            "reader", "llama-2-7b", ("conv_prompt", 2.0, 256, 3584), ("conv_output", 0.8, 16, 512)
        ),
        _role(
            "summariser",
            "llama-2-7b",
            ("conv_prompt", 2.0, 256, 3584),
            ("conv_output", 1.0, 16, 512),
        ),
        _role(
            "answer", "llama-2-7b", ("conv_prompt", 1.5, 64, 3072), ("conv_output", 1.5, 16, 1024)
        ),
        _role(
            "debater", "llama-2-7b", ("conv_prompt", 1.0, 64, 3072), ("conv_output", 1.5, 32, 1024)
        ),
        _role(
            "coder",
            "codellama-34b",
            ("code_prompt", 1.0, 64, 12288),
            ("code_output", 24.0, 32, 4096),
        ),
    )
}


@dataclass(frozen=True, slots=True)
class ToolProfile:
    cpu_work: Num
    ext_latency: Num


TOOL_PROFILES: dict[str, ToolProfile] = {
    "web_search": ToolProfile(LogNormal(0.08, 0.4, 0.05, 0.5), LogNormal(0.6, 0.5, 0.2, 2.0)),
    "db_query": ToolProfile(LogNormal(0.1, 0.5, 0.05, 1.0), LogNormal(0.35, 0.6, 0.2, 2.0)),
    "retrieval": ToolProfile(LogNormal(0.4, 0.5, 0.05, 3.0), 0.0),
    "code_exec": ToolProfile(LogNormal(1.0, 0.8, 0.05, 5.0), 0.0),
    "file_io": ToolProfile(LogNormal(0.1, 0.5, 0.05, 1.0), LogNormal(0.05, 0.5, 0.0, 0.5)),
}


def get_role(name: str) -> Role:
    role = ROLES.get(name)
    if role is None:
        raise InputError("roles", "role", f"unknown role {name!r}; known: {', '.join(ROLES)}")
    return role


def llm_task(
    id: str, role: str, model: str | None = None, revealed_by: str | None = None
) -> TaskTemplate:
    """An llm task sized by ``role`` (model defaults to the role's)."""
    r = get_role(role)
    return TaskTemplate(
        id=id,
        kind="llm",
        model=model or r.model,
        role=role,
        prompt_tokens=r.prompt,
        output_tokens=r.output,
        revealed_by=revealed_by,
    )


def tool_task(
    id: str,
    tool: str,
    cpu_work: Num | None = None,
    ext_latency: Num | None = None,
) -> TaskTemplate:
    """A tool task with the tool's profile (explicit values override it)."""
    prof = TOOL_PROFILES.get(tool)
    cpu = cpu_work if cpu_work is not None else (prof.cpu_work if prof else 0.0)
    ext = ext_latency if ext_latency is not None else (prof.ext_latency if prof else 0.0)
    return TaskTemplate(id=id, kind="tool", tool=tool, cpu_work=cpu, ext_latency=ext)


def tool_choice(weights: Mapping[str, float]) -> ToolChoice:
    """A per-realisation tool draw; each option carries its tool's profile."""
    opts = []
    for name, w in weights.items():
        prof = TOOL_PROFILES.get(name)
        if prof is None:
            raise InputError(
                "roles", "tool", f"no profile for tool {name!r}; known: {', '.join(TOOL_PROFILES)}"
            )
        opts.append(ToolOption(name, w, prof.cpu_work, prof.ext_latency))
    return ToolChoice(tuple(opts))


def choice_task(id: str, weights: Mapping[str, float]) -> TaskTemplate:
    return TaskTemplate(id=id, kind="tool", tool=tool_choice(weights))
