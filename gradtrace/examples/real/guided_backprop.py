"""Guided backpropagation with module backward hooks on the ReLUs.

Source: utkuozbulak/pytorch-cnn-visualizations, src/guided_backprop.py (GuidedBackprop: a
backward hook on every ReLU of model.features clamps grad_in[0] at 0; a hook on the first
layer keeps the gradient of the image; backward from a one-hot output).
Changes: a tiny CNN built from torch.nn on a random 8x8 image instead of a pretrained AlexNet
and a picture file; no images saved; a second copy of the model uses
register_full_backward_hook (torch's current API) next to the original's
register_backward_hook; the image gradients' norms printed as JSON.
"""

import json

import torch
from torch import nn
from torch.nn import ReLU

torch.manual_seed(0)


def make_model():
    model = nn.Module()
    model.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
    model.classifier = nn.Linear(4 * 8 * 8, 5)
    model.forward = lambda x: model.classifier(model.features(x).flatten(1))
    return model


class GuidedBackprop:
    def __init__(self, model, full=False):
        self.model = model
        self.gradients = None
        self.full = full
        self.model.eval()
        self.update_relus()
        self.hook_layers()

    def register(self, module, hook):
        if self.full:
            module.register_full_backward_hook(hook)
        else:
            module.register_backward_hook(hook)

    def hook_layers(self):
        def hook_function(module, grad_in, grad_out):
            self.gradients = grad_in[0]

        first_layer = list(self.model.features._modules.items())[0][1]
        self.register(first_layer, hook_function)

    def update_relus(self):
        def relu_hook_function(module, grad_in, grad_out):
            if isinstance(module, ReLU):
                return (torch.clamp(grad_in[0], min=0.0),)

        for _, module in self.model.features._modules.items():
            if isinstance(module, ReLU):
                self.register(module, relu_hook_function)

    def generate_gradients(self, input_image, target_class):
        model_output = self.model(input_image)
        self.model.zero_grad()
        one_hot_output = torch.zeros(1, model_output.size()[-1])
        one_hot_output[0][target_class] = 1
        model_output.backward(gradient=one_hot_output)
        return self.gradients


model = make_model()
full_model = make_model()
full_model.load_state_dict(model.state_dict())
prep_img = torch.randn(1, 3, 8, 8, requires_grad=True)
full_img = prep_img.detach().clone().requires_grad_()
guided = GuidedBackprop(model).generate_gradients(prep_img, 2)
full_guided = GuidedBackprop(full_model, full=True).generate_gradients(full_img, 2)
print(json.dumps({"prep_img": prep_img.grad.norm().item(),
                  "full_img": full_img.grad.norm().item(),
                  "full_guided": full_guided.norm().item(),
                  "all_positive": bool((full_img.grad >= 0).all())}))
