/*
 * pockmcu_logits_xent_grad_s8 - softmax cross-entropy loss and its gradient
 * w.r.t. the logits, from int8 logits (models without a softmax layer).
 *
 * With z = scale * (q - zero_point) and d_c = max(q) - q_c in [0, 255]:
 *   e_c = exp_table[d_c]            (exp(-scale * d_c) as float32, made at compile time)
 *   sum = e_0 + e_1 + ...           (float32, in class order)
 *   grad_logits[c] = e_c / sum - (c == label ? 1 : 0)
 *   returns -ln p_label = logf(sum) + scale * d_label
 * softmax(z) = softmax(z - max z), so neither the zero point nor an exp of a
 * large number appears. Only +, / and - on float32 reach the gradient: it is
 * the same on every IEEE-754 target (logf only affects the returned loss). A
 * label outside [0, classes) yields the gradient without the one-hot term and
 * returns 0.
 */
#include "pockmcu_nn.h"

#include <math.h>

float pockmcu_logits_xent_grad_s8(const int8_t *logits,
                                  int32_t classes,
                                  int32_t label,
                                  float scale,
                                  const float *exp_table,
                                  float *grad_logits)
{
    int32_t c;
    int32_t max = -128;
    float sum = 0.0f;
    for (c = 0; c < classes; c++)
    {
        max = logits[c] > max ? logits[c] : max;
    }
    for (c = 0; c < classes; c++)
    {
        const float e = exp_table[max - (int32_t)logits[c]];
        grad_logits[c] = e;
        sum += e;
    }
    for (c = 0; c < classes; c++)
    {
        const float p = grad_logits[c] / sum;
        grad_logits[c] = c == label ? p - 1.0f : p;
    }
    if (label < 0 || label >= classes)
    {
        return 0.0f;
    }
    return logf(sum) + scale * (float)(max - (int32_t)logits[label]);
}
