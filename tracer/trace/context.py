"""The state of one trace, shared by the root frame and every frame inlined into it."""
import torch

from ..graph.output_graph import OutputGraph
from ..graph.side_effects import SideEffects
from ..variables.exceptions import OuterException


class TraceContext:
    """State shared by the root frame and every inlined frame of one trace."""

    def __init__(self, code, f_globals, f_builtins, size_policy=None):
        self.code = code
        self.root_frame = None
        self.f_globals = f_globals
        self.f_builtins = f_builtins
        self.output = OutputGraph(size_policy)
        self.guards = []
        self.side_effects = SideEffects()
        self.wrap_memo = {}
        self.input_tensor_sources = []
        self.mutable_inputs = []
        self.steps = 0
        self.module_hooks_guarded = False
        self.root_steps = 0       # instructions executed by the root frame
        self.break_at = None      # stop the root frame before this step (graph break)
        self.grad_at_start = self.grad_at_stop = None  # real grad mode around the trace
        self.autocast_stack = []  # AutocastVariables entered (for real too) and not left yet
        self.autocast_at_stop = []  # ... when the trace stopped
        self.entry_dispatch_tls = (torch._C._dispatch_tls_local_include_set(),
                                   torch._C._dispatch_tls_local_exclude_set())
        self.module_calls = []    # NNModuleVariables whose forward is being inlined (node_meta)
        self.stock_leaves = set()  # types of stock nn modules kept as call_module (StockLeaf)
        self.leaf_breaks = set()  # stock nn module types to call as Python (CodeCache.leaf_breaks)
        self.frames = []          # every Frame of this trace
        self.root_args = {}       # the root frame's arguments as bound (convert_frame._bind_root)
        self.frame_stack = []     # frames whose run() is executing, innermost last
        self.generators = []      # GeneratorVariables made by the trace, not finished
        self.foreign_generators = []  # real generators from outside that would run code on close
        self.finalizing = False   # closing an unreachable generator (variables/generators.py)
        # the handled exception per exception state (variables/exceptions.py): the thread's,
        # then one per running generator; the caller's is not known until needed
        self.exc_stack = [OuterException()]
        self.cell_boxes = {}      # id(real closure cell) -> its CellBox (variables/functions.py)
        self.shape_marks = []     # torch._dynamo.mark_dynamic & co. seen (compile_annotations.py)
        self.handled_at_entry = None  # sys.exc_info()[1] when the frame was called
        # an op was traced where a try/with of the traced code would catch its exception:
        # if the graph raises there, the frame must rerun as Python (rerun.py)
        self.ops_under_handler = False
        # (root step, root instruction) of the first op that wrote a graph input in place
        # while recording autograd history: where to break if the graph must rerun (rerun.py)
        self.history_write_at = None
