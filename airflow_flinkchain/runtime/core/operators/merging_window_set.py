"""Flink's MergingWindowSet: the merged windows of one key of a merging (session) window operator."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from airflow_flinkchain.window import MergingWindowAssigner, Window


class MergingWindowSet:
    """Flink's MergingWindowSet for one key: maps each in-flight (merged) window to the window
    whose namespace holds its state, so merging never moves state more than once."""

    def __init__(self, assigner: MergingWindowAssigner, state: Any):
        self._assigner = assigner
        self._state = state
        self.mapping: Dict[Window, Window] = dict(state.value() or {})

    def persist(self) -> None:
        if self.mapping:
            self._state.update(self.mapping)
        else:
            self._state.clear()

    def get_state_window(self, window: Window) -> Optional[Window]:
        return self.mapping.get(window)

    def retire_window(self, window: Window) -> None:
        if self.mapping.pop(window, None) is None:
            raise RuntimeError(f"window {window} is not in the in-flight window set")

    def add_window(self, new_window: Window,
                   merge_function: Callable[[Window, List[Window], Window, List[Window]], None]) -> Window:
        """The window `new_window` ends up in; `merge_function(merge_result, merged_windows,
        state_window_result, merged_state_windows)` per merge."""
        windows = list(self.mapping)
        windows.append(new_window)
        merge_results: Dict[Window, List[Window]] = {}

        class _Collect(MergingWindowAssigner.MergeCallback):
            def merge(self, to_be_merged, merge_result):
                merge_results[merge_result] = list(to_be_merged)

        self._assigner.merge_windows(windows, _Collect())

        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in merge_results.items():
            if new_window in merged_windows:
                merged_windows.remove(new_window)
                merged_new_window = True
                result_window = merge_result
            merged_state_window = self.mapping[merged_windows[0]]
            merged_state_windows = []
            for merged in merged_windows:
                res = self.mapping.pop(merged, None)
                if res is not None:
                    merged_state_windows.append(res)
            self.mapping[merge_result] = merged_state_window
            merged_state_windows.remove(merged_state_window)
            # merging one pre-existing window into itself without extending it: nothing to merge
            if not (merge_result in merged_windows and len(merged_windows) == 1):
                merge_function(merge_result, merged_windows, self.mapping[merge_result], merged_state_windows)

        if not merge_results or (result_window == new_window and not merged_new_window):
            self.mapping[result_window] = result_window
        return result_window
