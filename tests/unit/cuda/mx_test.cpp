// mx.quantize / mx.dequantize on the CUDA backend (ops/cuda/mx_quant.cu;
// label "gpu") against the CPU kernels (themselves checked against the spec
// reference in tests/unit/ops/mx_test.cpp): the same packed element bytes
// and scale codes, and the same dequantized bits, for every format, both
// scale roundings, float32/float16/bfloat16 inputs, contiguous and strided
// block axes, random bit patterns (NaN, Inf, subnormal blocks) and
// tie-heavy blocks. Skips, saying why, without a device; the registration
// check runs everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/cuda/cuda_backend.h"
#include "ops/kernels/float_conv.h"
#include "ops/mx_tensor.h"
#include "ops/op_registry.h"
#include "tests/unit/ops/op_call_util_ew.h"

namespace tensord {
namespace {

using test_ew::Arg;

TEST(CudaMxRegistration, KernelsAreRegistered) {
  for (const char* name : {"mx.quantize", "mx.dequantize"}) {
    const OpDef* op = OpRegistry::global().find(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(op->kernels.count("cuda"), 1u) << name;
    EXPECT_EQ(op->accepts.count("cuda"), 1u) << name;
  }
}

class CudaMxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cuda_backend();
    if (!backend_) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports " << cuda_device_count() << ")";
  }

  // The op's CUDA kernel on device copies of the tensor arguments; host results.
  std::vector<Tensor> run_cuda(const std::string& name, const std::vector<Arg>& pos) {
    const OpDef& op = *OpRegistry::global().find(name);
    OpArgs<Tensor> args = test_ew::bind(op, pos, {});
    const Device dev = backend_->devices().at(0).device;
    for (auto& list : args.tensors) {
      for (auto& t : list) t = t.to_device(backend_.get(), dev, nullptr);
    }
    OpContext ctx;
    ctx.backend = backend_.get();
    ctx.device = dev;
    ctx.stream = backend_->create_stream(dev);
    std::vector<Tensor> outs = op.kernels.at("cuda")(ctx, args);
    backend_->synchronize(ctx.stream);
    backend_->destroy_stream(ctx.stream);
    for (auto& t : outs) t = t.to_host();
    return outs;
  }

  std::unique_ptr<Backend> backend_;
};

Tensor input(DType dt, const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor t = Tensor::empty_host(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int kind = static_cast<int>((i / 32 + seed) % 4);
    float x = kind == 0   ? kernels::f32_from_bits(static_cast<uint32_t>(rng()))  // any bits
              : kind == 1 ? std::ldexp(static_cast<float>(static_cast<int>(rng() % 129) - 64) / 16.0f,
                                       static_cast<int>(rng() % 40) - 20)                       // ties
              : kind == 2 ? kernels::f32_from_bits(static_cast<uint32_t>(rng()) & 0x807fffffu)  // subnormals
                          : nd(rng);
    if (dt == DType::kFloat32) {
      t.data_ptr<float>()[i] = x;
    } else {
      static_cast<uint16_t*>(t.data())[i] = dt == DType::kFloat16 ? kernels::f32_to_f16(x) : kernels::f32_to_bf16(x);
    }
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST_F(CudaMxTest, QuantizeAndDequantizeMatchTheCpuKernels) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const Case cases[] = {{{4, 256}, -1}, {{64, 3, 40}, 0}, {{2, 96, 17}, 1}};
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (const Case& c : cases) {
      const Tensor x = input(dt, c.shape, static_cast<uint32_t>(c.shape.size() * 7 + static_cast<int>(dt)));
      for (const char* fmt : {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1"}) {
        for (const char* r : {"floor", "rceil"}) {
          const std::vector<Arg> args = {x, fmt, int64_t{32}, c.axis, r};
          const Tensor want = test_ew::call("mx.quantize", args).at(0);
          const Tensor got = run_cuda("mx.quantize", args).at(0);
          const std::string at = std::string(fmt) + " " + r + " " + std::string(dtype_name(dt)) + shape_str(c.shape);
          ASSERT_TRUE(got.is_mx()) << at;
          EXPECT_EQ(mx_meta_str(*got.meta().mx), mx_meta_str(*want.meta().mx)) << at;
          EXPECT_TRUE(same_bits(got, want)) << at << ": packed bytes or scales differ";
          const Tensor dw = test_ew::call("mx.dequantize", {want}).at(0);
          const Tensor dg = run_cuda("mx.dequantize", {want}).at(0);
          ASSERT_EQ(dg.shape(), dw.shape()) << at;
          int64_t diff = 0;
          for (int64_t i = 0; i < dw.numel(); ++i) {
            const float a = dw.data_ptr<float>()[i], b = dg.data_ptr<float>()[i];
            diff += !((std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0);
          }
          EXPECT_EQ(diff, 0) << at << ": dequantized values differ";
        }
      }
    }
  }
}

TEST_F(CudaMxTest, EmptyInputGivesAnEmptyMxTensor) {
  const Tensor x = Tensor::empty_host(DType::kFloat32, {0, 64});
  const Tensor q = run_cuda("mx.quantize", {x, "mxfp4_e2m1", int64_t{32}, int64_t{-1}, "floor"}).at(0);
  ASSERT_TRUE(q.is_mx());
  EXPECT_EQ(q.nbytes(), 0u);
  EXPECT_EQ(run_cuda("mx.dequantize", {q}).at(0).numel(), 0);
}

}  // namespace
}  // namespace tensord
