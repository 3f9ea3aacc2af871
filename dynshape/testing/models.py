"""Small real models built in PyTorch (random weights) and exported to ONNX with dynamic
axes: an MLP, a CNN with dynamic H and W, a ResNet-style network and a transformer encoder.
Used by the graph layer's tests and the model benchmark (needs torch).

``MODELS[name]()`` returns the ONNX bytes; ``MODULES[name]()`` the torch module and its
export arguments."""
import io


def _export(module, args, names, dynamic, opset=17):
    import torch
    module.eval()
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, args, buf, input_names=names[0], output_names=names[1],
                          dynamic_axes=dynamic, opset_version=opset, dynamo=False)
    return buf.getvalue()


def mlp():
    import torch
    from torch import nn
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.GELU(),
                      nn.Linear(128, 10), nn.LogSoftmax(-1))
    return (m, (torch.randn(4, 64),), (["x"], ["y"]), {"x": {0: "batch"},
                                                              "y": {0: "batch"}})


def cnn():
    import torch
    from torch import nn
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 5))
    with torch.no_grad():
        m[1].running_mean.uniform_(-0.5, 0.5)
        m[1].running_var.uniform_(0.5, 2.0)
    return (m, (torch.randn(2, 3, 20, 24),), (["img"], ["logits"]),
                   {"img": {0: "n", 2: "h", 3: "w"}, "logits": {0: "n"}})


def resnet():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(self.b2(self.c2(y)) + x)

    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), Block(16), Block(16),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 7))
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.uniform_(-0.3, 0.3)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
    return (m, (torch.randn(1, 3, 16, 16),), (["img"], ["out"]),
                   {"img": {0: "n", 2: "h", 3: "w"}, "out": {0: "n"}})


def encoder():
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, d=32, heads=4, ff=64):
            super().__init__()
            self.h, self.dk = heads, d // heads
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / self.dk ** 0.5, dim=-1) @ v
            x = self.n1(x + self.proj(a.transpose(1, 2).reshape(b, t, d)))
            return self.n2(x + self.ff(x))

    torch.manual_seed(0)
    m = nn.Sequential(Layer(), Layer())
    return (m, (torch.randn(2, 7, 32),), (["x"], ["y"]),
                   {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})


#: name -> a builder returning (torch module, example args, (input names, output names),
#: dynamic axes)
MODULES = {"mlp": mlp, "cnn": cnn, "resnet": resnet, "encoder": encoder}


def export(name):
    """The ONNX bytes of model ``name`` (opset 17, dynamic axes)."""
    return _export(*MODULES[name]())


MODELS = {name: (lambda name=name: export(name)) for name in MODULES}
