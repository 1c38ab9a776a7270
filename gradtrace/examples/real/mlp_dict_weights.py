"""A multilayer perceptron whose weights and biases are kept in two dicts.

Source: ported from aymericdamien/TensorFlow-Examples (MIT),
examples/3_NeuralNetworks/neural_network_raw.py: `weights = {'h1': …, 'h2': …, 'out': …}`,
`biases = {'b1': …, 'b2': …, 'out': …}`, neural_net(x) of two hidden layers read from the
dicts, softmax cross-entropy and Adam.
Changes: PyTorch tensors with requires_grad instead of tf.Variable, an eager training loop
instead of a session; random 20-feature inputs and 4 classes instead of MNIST; 8 hidden
units; 3 steps; the gradient norms after the last backward are printed as JSON.
"""

import json

import torch
import torch.nn.functional as F

torch.manual_seed(0)

# Parameters
learning_rate = 0.001
num_steps = 3
batch_size = 16

# Network Parameters
n_hidden_1 = 8  # 1st layer number of neurons
n_hidden_2 = 8  # 2nd layer number of neurons
num_input = 20  # data input
num_classes = 4  # total classes

# Store layers weight & bias
weights = {
    'h1': torch.randn(num_input, n_hidden_1, requires_grad=True),
    'h2': torch.randn(n_hidden_1, n_hidden_2, requires_grad=True),
    'out': torch.randn(n_hidden_2, num_classes, requires_grad=True),
}
biases = {
    'b1': torch.randn(n_hidden_1, requires_grad=True),
    'b2': torch.randn(n_hidden_2, requires_grad=True),
    'out': torch.randn(num_classes, requires_grad=True),
}


# Create model
def neural_net(x):
    # Hidden fully connected layer
    layer_1 = torch.add(torch.matmul(x, weights['h1']), biases['b1'])
    # Hidden fully connected layer
    layer_2 = torch.add(torch.matmul(layer_1, weights['h2']), biases['b2'])
    # Output fully connected layer with a neuron for each class
    return torch.matmul(layer_2, weights['out']) + biases['out']


optimizer = torch.optim.Adam([*weights.values(), *biases.values()], lr=learning_rate)
for _step in range(1, num_steps + 1):
    batch_x = torch.randn(batch_size, num_input)
    batch_y = torch.randint(0, num_classes, (batch_size,))
    optimizer.zero_grad()
    loss_op = F.cross_entropy(neural_net(batch_x), batch_y)
    loss_op.backward()
    optimizer.step()
print(json.dumps({**{f'weights["{k}"]': v.grad.norm().item() for k, v in weights.items()},
                  **{f'biases["{k}"]': v.grad.norm().item() for k, v in biases.items()}}))
