"""KV cache: animated map of every physical block per replica, utilization and preemptions."""

import streamlit as st

from explorer.frame import through_app
from explorer.selection import time_window, zoom_button
from explorer.state import result, selected_request
from explorer.views import derived
from sim_core.viz.kv_map import MAX_CELLS, kv_layout, kv_map_figure
from sim_core.viz.overview import blocks_text

through_app()

st.title("KV cache")
run = result("full")  # every block allocation and request state change
end = float(run.requests["completed_at"].max()) if run.requests["completed_at"].notna().any() else 1.0
replicas = len(run.replicas)
group, cells, _, _ = kv_layout(run.num_blocks, replicas, 40)
st.caption(f"{blocks_text(run)} blocks per replica of {run.replicas[0].block_size} tokens, "
           f"{end:.1f} s simulated. "
           + (f"Each cell aggregates {group} blocks (more than {MAX_CELLS:,} blocks): colour is the share in use."
              if group > 1 else "One cell per physical block; hover to see its owner."))
left, mid, right = st.columns([3, 1, 1])
window = time_window("kv", run, end, (0.0, end), follow=False, where=left)
frames = mid.slider("Frames", 10, 120, 40, 10, key="kv_frames", help="Snapshots in the animation.")
shown = right.number_input("Replicas shown", 1, replicas, min(replicas, 4), key="kv_replicas")
figure = derived(run, kv_map_figure, *window, max_frames=frames, selected=selected_request(), replicas=int(shown))
zoom_button("kv")
st.plotly_chart(figure, key="kv_map")
st.caption("Press ▶ Play to animate, drag the t = slider to scrub. Below: KV use per replica (dotted: "
           "vllm_v0's CPU swap space in use; dashed: vllm_v1's CPU offload tier in use); x marks a preemption "
           "(hover for the request). The selected request's blocks are yellow; the map opens where it holds most.")
offload = run.summary.get("kv_offload_hit_tokens")
if offload is not None:
    st.caption(f"KV offload: {run.summary['kv_offload_blocks_stored']:,} blocks stored to the CPU tier "
               f"({run.replicas[0].num_offload_blocks:,} blocks per replica), {offload:,} prompt tokens loaded "
               f"back instead of computed, {run.summary['kv_offload_load_s']:.3f} s of loads.")
