"""Operator fusion by code generation: a run of chained map / filter /
flat_map / source / sink operators (each feeding the next through a single
untagged ChainingOutput) becomes ONE generated Python function, so a record
crosses the run with no call per operator beyond the user functions - as
fast as the same functions hand-fused in a loop.

Per stage the generated code is
    try: <call user function> except Exception as e: err_i(e, v) else: <next stage>
(Python 3.11 try blocks cost nothing until something raises), so the error
policy applies per operator and per record; `else:`/loop nesting means a
dead-lettered record simply does not go on, and a flat_map's remaining
outputs still do. Counters are closure variables (one integer add where
needed): the head's records_in, each filter's filtered count, each
flat_map's output count; everything else is derived (map out = in - errors).

A file sink at the end of a segment is fed by `list.append` on its buffer
(`FileSinkWriter.fused_hooks`) and flushed when full, checked once per input
chunk of run() and once per process() call: no method call per record. A
failing flush (a record that does not fit the sink's output_type) fails the
subtask naming the sink and, in the cause, the record - under every on_error
policy, as before.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.runtime import copying
from airflow_flinkchain.runtime.copying import (IMMUTABLE_TYPES, RC_ITEM, RC_ITEM_LOCAL, RC_PRIVATE, RC_SEQ,
                                                copy_record)
from airflow_flinkchain.runtime.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.errors import ChainExecutionError
from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.runtime.outputs import BroadcastingOutputCollector, ChainingOutput, RecordWriterOutput

K = OperatorKind


def _main_chaining(op):
    """The one ChainingOutput that gets all of op's main records, or None: op's output
    itself, or the only untagged output of a fan-out whose others are side outputs."""
    out = op.output
    if isinstance(out, ChainingOutput):
        return out if out.output_tag is None else None
    if type(out) is BroadcastingOutputCollector:
        mains = [o for o in out.outputs if o.output_tag is None]
        if len(mains) == 1 and isinstance(mains[0], ChainingOutput):
            return mains[0]
    return None


def _next_fused(op):
    """The operator `op` hands all its main records to, if it can join op's fused run."""
    out = _main_chaining(op)
    return out.target if out is not None and out.target.fusable else None


class Segment:
    def __init__(self, ops: list, timed: bool):
        self.ops = ops
        self.timed = timed
        self.errors = [0] * len(ops)
        self._flushed = (0, {}, {})
        ns: dict[str, Any] = {
            "IMM": IMMUTABLE_TYPES, "copy_record": copy_record, "CEE": ChainExecutionError,
            "allimm": IMMUTABLE_TYPES.issuperset, "rc": sys.getrefcount, "RCP": RC_PRIVATE, "RCI": RC_ITEM,
            "RCS": RC_SEQ, "RCL": RC_ITEM_LOCAL, "flat": copying.flat_immutable,
            "frc": copying.flat_refcount, "SEQ": frozenset({list, tuple}),
            "cell": ops[0].cell, "SPECIAL": frozenset({StreamRecord, Watermark}), "WM": Watermark,
            "on_wm": ops[0].process_watermark, "OT": OutputTag,
        }
        last = ops[-1]
        terminal = "none"
        if last.kind is not K.SINK:
            out = last.output
            if type(out) is RecordWriterOutput and out.output_tag is None:
                # leaves the chain here: inline the record writer's call
                sel = out.record_writer.selector
                terminal = "rw_const" if type(sel) is int else "rw_bcast" if type(sel) is tuple else "rw_select"
                ns.update(rw_write=out.record_writer.channel_sink.write, rw_sel=sel, rw_fail=out.fail)
            elif type(out) is BroadcastingOutputCollector:
                # a fan-out: call each output's handler inline, copying where it must
                targets = _fan_out_targets(out, timed)
                terminal = _fan_out_lines(targets)
                ns.update({f"fan{j}": handler for j, (_, handler) in enumerate(targets)})
            else:
                ns["emit"] = out.main_emitter(timed)
                terminal = "none" if ns["emit"] is None else "emit"
        buffered_sink = None
        for i, op in enumerate(ops):
            ns[f"fn{i}"] = op.fn
            ns[f"err{i}"] = self._counting_error_handler(i, op.error_handler(timed))
            if op.kind is K.PROCESS:
                ctx = op.context(timed)
                ns[f"ctx{i}"], ns[f"side{i}"] = ctx, ctx.output
            hooks = getattr(getattr(op, "writer", None), "fused_hooks", None) if op.kind is K.SINK else None
            if hooks is not None:
                buffered_sink = i
                add, flush_if_full, buffer, limit = hooks()
                ns.update({f"add{i}": add, f"chk{i}": _named_check(op, flush_if_full), f"buf{i}": buffer,
                           f"LIM{i}": limit})
        source = _generate(ops, [getattr(_main_chaining(op), "needs_copy", False) for op in ops], terminal,
                           sorted(ns), buffered_sink)
        self.source = source
        # names become closure variables of the generated functions (faster than globals)
        self.process, self.run, self.run_plain, self._counts = ns_factory(source)(**ns)
        for op in ops:
            op._segments.append(self)

    def _counting_error_handler(self, i: int, handle: Callable) -> Callable:
        errors = self.errors

        def err(exc: BaseException, record: Any) -> None:
            errors[i] += 1
            handle(exc, record)
        return err

    def flush_counts(self) -> None:
        """Add this segment's counts (since the last flush) to its operators' metrics."""
        c_in, filtered, outs = self._counts()
        p_in, p_filtered, p_outs = self._flushed
        self._flushed = (c_in, dict(filtered), dict(outs))
        records_in = c_in - p_in
        errs, self.errors = self.errors, [0] * len(self.ops)
        for i, op in enumerate(self.ops):
            kind = op.kind
            dropped = errs[i]
            if kind is K.FILTER:
                f = filtered[i] - p_filtered.get(i, 0)
                op.metrics.filtered += f
                out = records_in - f - dropped
            elif kind is K.FLAT_MAP or kind is K.PROCESS:
                out = outs[i] - p_outs.get(i, 0)
            elif kind is K.SINK:
                out = 0
            else:
                out = records_in - dropped
            op.add_counts(records_in, out)
            records_in = out


def _fan_out_targets(out, timed: bool) -> list:
    """[(copy?, handler)] of a fan-out's main outputs, in order (object reuse off: Flink's
    BroadcastingOutputCollector with CopyingChainingOutputs, each copying for itself when it must)."""
    targets = []
    mains = [o for o in out.outputs if o.output_tag is None]
    for j, o in enumerate(mains):
        if isinstance(o, ChainingOutput):
            # object reuse on: Flink's CopyingBroadcastingOutputCollector copies for all but the last
            copy = j < len(mains) - 1 if out.object_reuse else o.needs_copy
            targets.append((copy, o.target.handler(timed)))
        else:  # a RecordWriterOutput serializes (or copies) what it is given right away
            emit = o.main_emitter(timed)
            if emit is not None:
                targets.append((False, emit))
    return targets


def _fan_out_lines(targets: list) -> list:
    lines = []
    for j, (needs_copy, _) in enumerate(targets):
        if not needs_copy:
            lines.append(f"fan{j}({{v}})")
        elif copying.flat_refcount is not None:
            lines += ["if type({v}) is dict and flat({v}):", f"    fan{j}({{v}}.copy())",
                      "elif type({v}) in IMM:", f"    fan{j}({{v}})", "else:", f"    fan{j}(copy_record({{v}}))"]
        else:
            lines += ["if type({v}) in IMM:", f"    fan{j}({{v}})", "else:", f"    fan{j}(copy_record({{v}}))"]
    return lines or ["pass"]


def _named_check(op, flush_if_full: Callable) -> Callable:
    """A buffered sink's per-chunk flush; its failure (e.g. a record that does not fit the
    sink's output_type) names the sink operator (the message of the cause names the record)."""
    def check() -> None:
        try:
            flush_if_full()
        except ChainExecutionError:
            raise
        except Exception as exc:
            raise op.error("process", exc) from exc
    return check


def build_segment(head, timed: bool) -> Segment:
    ops = [head]
    if not timed:  # the timed wiring stays unfused, to time each operator
        while ops[-1].kind is not K.SINK and (nxt := _next_fused(ops[-1])) is not None:
            ops.append(nxt)
    return Segment(ops, timed)


def ns_factory(source: str) -> Callable:
    scope: dict[str, Any] = {}
    exec(compile(source, "<fused chain segment>", "exec"), scope)
    return scope["factory"]


_TERMINALS = {
    "none": ["pass"],
    "emit": ["emit({v})"],
    "rw_const": ["try:", "    rw_write(rw_sel, {v}, {ts})", "except Exception as e:", "    rw_fail(e, {v})"],
    "rw_select": ["try:", "    rw_write(rw_sel({v}), {v}, {ts})", "except Exception as e:",
                  "    rw_fail(e, {v})"],
    "rw_bcast": ["try:", "    for ch in rw_sel:", "        rw_write(ch, {v}, {ts})",
                 "except Exception as e:", "    rw_fail(e, {v})"],
}


def _private_test(kind, v: str, i: int, var: str, count: Optional[str] = None):
    """Python condition true when the output `v` of operator i is referenced by
    the generated code's locals only (None: no such test for this kind).

    Object reuse off, Flink copies each record an operator emits, so that
    nobody can mutate it under the next operator. That copy is unobservable
    when nothing but the generated code's own local variables references the
    record, which CPython's refcount states exactly (RC_* are calibrated in
    copying.py): the user function kept no reference (no attribute, closure
    cell, container, generator frame, ...; plain dicts support no weak
    references), so the next operator is its only holder. This is used for
    plain dicts whose keys and values are all immutable scalars only - a
    nested mutable value might be shared, and is copied as before.
      map:      v = fn(x)  -> v is private iff refcount(v) == RC_PRIVATE
                (an operator returning its input fails this: x holds it too);
      flat_map: for v in r -> v is private iff refcount(v) == RC_PRIVATE (an
                iterator that keeps no reference), or r is a list/tuple that
                only the loop holds (refcount(r) == RC_SEQ) and v is in it once
                (refcount(v) == RC_ITEM), or once and is the flat_map's input
                record `x` (refcount(v) == RC_ITEM_LOCAL: our local x is the
                one more holder; x is not read again, as iterating a
                list/tuple cannot raise); a record emitted twice is copied.
    """
    if RC_PRIVATE is None:
        return None
    c = count or f"rc({v})"  # `count`: a variable already holding rc(v)
    if kind is K.MAP:
        return f"{c} == RCP"
    if kind is K.FLAT_MAP or kind is K.PROCESS:
        return (f"({c} == RCP or (type(r{i}) in SEQ and rc(r{i}) == RCS and ({c} == RCI"
                f" or ({v} is {var} and {c} == RCL))))")
    return None


def _generate(ops: list, copies: list, terminal, names: list, buffered_sink: Optional[int] = None) -> str:
    """`terminal`: a key of _TERMINALS, or the template lines ({v}, {ts}) that hand on a record."""
    n = len(ops)
    filters = [i for i, op in enumerate(ops) if op.kind is K.FILTER]
    flat_maps = [i for i, op in enumerate(ops) if op.kind is K.FLAT_MAP or op.kind is K.PROCESS]
    counters = ["c_in"] + [f"f{i}" for i in filters] + [f"o{i}" for i in flat_maps]

    ts = "cell.value"  # in run()'s loop over bare values the timestamp is known to be None

    def stage(i: int, var: str, ind: int) -> list[str]:
        pad = "    " * ind
        if i == n:
            lines = terminal if isinstance(terminal, list) else _TERMINALS[terminal]
            return [pad + line.format(v=var, ts=ts) for line in lines]
        kind, nxt = ops[i].kind, f"v{i + 1}"

        def then(v: str, ind2: int, src: str = var) -> list[str]:
            lines = []
            if i < n - 1 and copies[i]:
                pad2 = "    " * ind2
                c_check = copying.flat_refcount is not None
                cnt = f"n{i}"  # C check: -1, or the refcount of a flat dict (what rc() would say here)
                private = _private_test(kind, v, i, src, count=cnt if c_check else None)
                if private is None:
                    lines.append(pad2 + f"if type({v}) not in IMM: {v} = copy_record({v})")
                elif c_check:  # one call instead of two loops
                    lines += [pad2 + f"{cnt} = frc({v})",
                              pad2 + f"if {cnt} < 0:",
                              pad2 + f"    if type({v}) not in IMM:",
                              pad2 + f"        {v} = copy_record({v})",
                              pad2 + f"elif not {private}:",
                              pad2 + f"    {v} = {v}.copy()"]
                else:  # copy_record inlined for flat dicts; no copy at all when only our locals hold it
                    # (an inline loop over keys and values is cheaper than any C helper for small dicts)
                    q = f"q{i}"
                    lines += [pad2 + f"if type({v}) is dict:",
                              pad2 + f"    for {q} in {v}.values():",
                              pad2 + f"        if type({q}) not in IMM:",
                              pad2 + f"            {v} = copy_record({v})",
                              pad2 + "            break",
                              pad2 + "    else:",
                              pad2 + f"        for {q} in {v}:",
                              pad2 + f"            if type({q}) not in IMM:",
                              pad2 + f"                {v} = copy_record({v})",
                              pad2 + "                break",
                              pad2 + "        else:",
                              pad2 + f"            if not {private}:",
                              pad2 + f"                {v} = {v}.copy()",
                              pad2 + f"elif type({v}) not in IMM:",
                              pad2 + f"    {v} = copy_record({v})"]
            return lines + stage(i + 1, v, ind2)

        if kind is K.SOURCE:
            return then(var, ind)
        if kind is K.MAP:
            return [pad + "try:", pad + f"    {nxt} = fn{i}({var})",
                    pad + "except Exception as e:", pad + f"    err{i}(e, {var})",
                    pad + "else:", *then(nxt, ind + 1)]
        if kind is K.FILTER:
            return [pad + "try:", pad + f"    k{i} = fn{i}({var})",
                    pad + "except Exception as e:", pad + f"    err{i}(e, {var})",
                    pad + "else:", pad + f"    if k{i}:", *then(var, ind + 2),
                    pad + "    else:", pad + f"        f{i} += 1"]
        if kind is K.FLAT_MAP or kind is K.PROCESS:
            # process: as flat_map, plus `yield tag, value` pairs to side outputs
            call, side = (f"fn{i}({var})", []) if kind is K.FLAT_MAP else (f"fn{i}({var}, ctx{i})", [
                pad + f"            if type({nxt}) is tuple and len({nxt}) == 2 and type({nxt}[0]) is OT:",
                pad + f"                side{i}({nxt}[0], {nxt}[1])",
                pad + "                continue"])
            return [pad + "try:", pad + f"    r{i} = {call}",
                    pad + f"    if r{i} is not None:", pad + f"        for {nxt} in r{i}:", *side,
                    pad + f"            o{i} += 1", *then(nxt, ind + 3),
                    pad + "except CEE:", pad + "    raise",
                    pad + "except Exception as e:", pad + f"    err{i}(e, {var})"]
        if kind is K.SINK and i == buffered_sink:  # list.append: nothing to catch; flushed per chunk
            return [pad + f"add{i}({var})"]
        if kind is K.SINK:
            return [pad + "try:", pad + f"    fn{i}({var}, {ts})",
                    pad + "except Exception as e:", pad + f"    err{i}(e, {var})"]
        raise AssertionError(kind)

    nonlocal_line = "nonlocal " + ", ".join(counters)
    # a buffered sink is flushed when full: after each record handed to process(), after each chunk of run()
    check = [] if buffered_sink is None else [f"        chk{buffered_sink}()"]
    # process() runs per record: only a length test, the flush check when the buffer is full
    per_record_check = [] if buffered_sink is None else [
        f"        if len(buf{buffered_sink}) >= LIM{buffered_sink}:", f"            chk{buffered_sink}()"]
    process_body = stage(0, "v0", 2) + per_record_check
    ts = "None"
    plain_run_body = stage(0, "v0", 3)
    plain_only_body = stage(0, "v0", 3)
    src = [f"def factory({', '.join(names)}):", "    " + "; ".join(f"{c} = 0" for c in counters),
           "    def process(v0):", "        " + nonlocal_line, "        c_in += 1", *process_body,
           "    def run(it):", "        " + nonlocal_line, "        for v0 in it:",
           "            if type(v0) in SPECIAL:",
           "                if type(v0) is WM:", "                    on_wm(v0)",
           "                else:", "                    cell.value = v0.timestamp",
           "                    process(v0.value)", "                    cell.value = None",
           "                continue",
           "            c_in += 1", *plain_run_body, *check,
           "    def run_plain(it):", "        " + nonlocal_line, "        for v0 in it:",
           "            c_in += 1", *plain_only_body, *check,
           "    def counts():",
           "        return c_in, {" + ", ".join(f"{i}: f{i}" for i in filters) + "}, {"
           + ", ".join(f"{i}: o{i}" for i in flat_maps) + "}",
           "    return process, run, run_plain, counts"]
    return "\n".join(src) + "\n"


def generic_run(handler: Callable, on_watermark: Callable, cell, plain_values: bool = False) -> Callable:
    """The input loop of a head that is not fused (process, keyed operators)."""
    wm_type, record_type = Watermark, StreamRecord
    if plain_values:
        def run_plain(it) -> None:
            for value in it:
                handler(value)
        return run_plain

    def run(it) -> None:
        for element in it:
            t = type(element)
            if t is wm_type:
                on_watermark(element)
            elif t is record_type:
                cell.value = element.timestamp
                handler(element.value)
                cell.value = None
            else:
                handler(element)

    return run
