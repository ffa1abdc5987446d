"""NetVLAD pooling: soft-assign each of N local features to K clusters (softmax over K+G logits
after BatchNorm), sum residuals to the cluster centres, intra- and global L2 normalisation:
(batch, N, D) -> (batch, K*D), flattened in (D, K) order (index d*K + k).

Ghost clusters (G = 16) take part in the softmax and are then dropped, so the kept
assignments of a row no longer sum to 1.
BatchNorm1d runs in training mode over the B*N rows (batch statistics, running stats updated
each call). A mask argument is accepted and ignored. forward raises ValueError if the input and
the parameters are on different devices.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cluster_size, feature_size, ghost_clusters):
        super().__init__()
        self.feature_size = feature_size
        self.cluster_size = cluster_size
        self.ghost_clusters = ghost_clusters
        init_sc = 1 / math.sqrt(feature_size)
        clusters = cluster_size + ghost_clusters
        self.clusters = nn.Parameter(init_sc * torch.randn(feature_size, clusters))  # (D, K+G)
        self.batch_norm = nn.BatchNorm1d(clusters)
        self.clusters2 = nn.Parameter(init_sc * torch.randn(1, feature_size, cluster_size))  # (1, D, K) centres
        self.out_dim = self.cluster_size * feature_size

    def forward(self, x, mask=None):
        max_sample = x.size()[1]  # N
        x = x.view(-1, self.feature_size)  # (B*N, D)
        if x.device != self.clusters.device:
            raise ValueError(f"x and clusters are on different devices: {x.device} vs {self.clusters.device}")
        assignment = torch.matmul(x, self.clusters)  # (B*N, K+G)
        assignment = self.batch_norm(assignment)
        assignment = F.softmax(assignment, dim=1)
        assignment = assignment[:, :self.cluster_size]  # drop ghosts AFTER the softmax
        assignment = assignment.view(-1, max_sample, self.cluster_size)  # (B, N, K)
        a_sum = torch.sum(assignment, dim=1, keepdim=True)  # (B, 1, K)
        a = a_sum * self.clusters2  # (B, D, K)
        assignment = assignment.transpose(1, 2)  # (B, K, N)
        x = x.view(-1, max_sample, self.feature_size)  # (B, N, D)
        vlad = torch.matmul(assignment, x)  # (B, K, D)
        vlad = vlad.transpose(1, 2)  # (B, D, K)
        vlad = vlad - a
        vlad = F.normalize(vlad)  # intra-normalisation: L2 over D for each cluster
        vlad = vlad.reshape(-1, self.cluster_size * self.feature_size)  # (B, D*K)
        vlad = F.normalize(vlad)
        return vlad


batch_size = 32
num_features = 100
num_clusters = 32
feature_size = 512
ghost_clusters = 16


def get_inputs():
    return [torch.randn(batch_size, num_features, feature_size)]


def get_init_inputs():
    return [num_clusters, feature_size, ghost_clusters]
