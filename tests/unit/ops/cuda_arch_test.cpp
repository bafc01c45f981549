// Which GPUs a build's CUDA kernels run on (ops/cuda_arch.h): decided on the
// host from the built architecture list and the device's compute capability.
#include "ops/cuda_arch.h"

#include <gtest/gtest.h>

namespace tensord {
namespace {

// The image's list (docker/Dockerfile's CUDA_ARCHITECTURES; test_docker.py
// checks that the two agree).
const char* kImage = "75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual";

TEST(CudaArch, ParsesCMakeListsInEveryForm) {
  CudaArchList l = parse_cuda_architectures("80-real;90a-real,100f 120-virtual;86");
  ASSERT_FALSE(l.unknown);
  ASSERT_EQ(l.archs.size(), 5u);
  EXPECT_EQ(l.archs[0].cc, 80);
  EXPECT_TRUE(l.archs[0].sass);
  EXPECT_FALSE(l.archs[0].ptx);
  EXPECT_EQ(l.archs[1].cc, 90);
  EXPECT_EQ(l.archs[1].variant, 'a');
  EXPECT_EQ(l.archs[2].cc, 100);
  EXPECT_EQ(l.archs[2].variant, 'f');
  EXPECT_TRUE(l.archs[2].sass && l.archs[2].ptx);
  EXPECT_FALSE(l.archs[3].sass);
  EXPECT_TRUE(l.archs[3].ptx);
  EXPECT_TRUE(l.archs[4].sass && l.archs[4].ptx) << "a plain number is both";
  for (const char* special : {"all", "all-major", "native", "", "90;native", "sm_90", "90-fast"}) {
    EXPECT_TRUE(parse_cuda_architectures(special).unknown) << special;
  }
}

TEST(CudaArch, MachineCodeRunsWithinItsMajorVersion) {
  CudaArchList h = parse_cuda_architectures("90-real");
  EXPECT_TRUE(cuda_arch_runs(9, 0, h));   // H100, H200
  EXPECT_FALSE(cuda_arch_runs(8, 0, h));  // A100
  EXPECT_FALSE(cuda_arch_runs(8, 9, h));  // L40S
  EXPECT_FALSE(cuda_arch_runs(10, 0, h)) << "SASS does not cross a major version";
  CudaArchList a = parse_cuda_architectures("80-real");
  EXPECT_TRUE(cuda_arch_runs(8, 6, a)) << "sm_80 code runs on 8.6 and 8.9";
  EXPECT_TRUE(cuda_arch_runs(8, 9, a));
  EXPECT_FALSE(cuda_arch_runs(7, 5, a));
  CudaArchList b = parse_cuda_architectures("86-real");
  EXPECT_FALSE(cuda_arch_runs(8, 0, b)) << "not on an older minor";
}

TEST(CudaArch, PtxRunsOnEveryLaterDevice) {
  CudaArchList p = parse_cuda_architectures("90-virtual");
  EXPECT_TRUE(cuda_arch_runs(9, 0, p));
  EXPECT_TRUE(cuda_arch_runs(10, 0, p)) << "the driver compiles compute_90 PTX for Blackwell";
  EXPECT_TRUE(cuda_arch_runs(12, 1, p));
  EXPECT_FALSE(cuda_arch_runs(8, 9, p));
  // The CI default (CMakeLists.txt): "90" is sm_90 and compute_90.
  CudaArchList ci = parse_cuda_architectures("90");
  EXPECT_TRUE(cuda_arch_runs(10, 0, ci));
  EXPECT_FALSE(cuda_arch_runs(8, 0, ci)) << "an A100 under a CI build: refused";
}

TEST(CudaArch, ArchSpecificAndFamilyVariants) {
  CudaArchList a = parse_cuda_architectures("90a");
  EXPECT_TRUE(cuda_arch_runs(9, 0, a));
  EXPECT_FALSE(cuda_arch_runs(10, 0, a)) << "90a PTX is not forward compatible";
  CudaArchList f = parse_cuda_architectures("100f-real");
  EXPECT_TRUE(cuda_arch_runs(10, 0, f));
  EXPECT_TRUE(cuda_arch_runs(10, 3, f));
  EXPECT_FALSE(cuda_arch_runs(12, 0, f));
  CudaArchList a2 = parse_cuda_architectures("100a-real");
  EXPECT_FALSE(cuda_arch_runs(10, 3, a2));
}

TEST(CudaArch, TheImageCoversDataCenterAndWorkstationGpus) {
  CudaArchList img = parse_cuda_architectures(kImage);
  struct Gpu {
    const char* name;
    int major, minor;
  };
  for (Gpu g : {Gpu{"T4", 7, 5}, Gpu{"A100", 8, 0}, Gpu{"A10 / RTX A6000", 8, 6}, Gpu{"L4 / L40S / RTX 6000 Ada", 8, 9},
                Gpu{"H100 / H200 / GH200", 9, 0}, Gpu{"B200 / GB200", 10, 0}, Gpu{"B300 / GB300", 10, 3},
                Gpu{"RTX PRO 6000 Blackwell", 12, 0}, Gpu{"DGX Spark GB10", 12, 1}, Gpu{"a later GPU", 13, 0}}) {
    EXPECT_TRUE(cuda_arch_runs(g.major, g.minor, img)) << g.name;
  }
  EXPECT_FALSE(cuda_arch_runs(7, 0, img)) << "V100: CUDA 13 dropped Volta";
  EXPECT_FALSE(cuda_arch_runs(6, 0, img)) << "P100";
}

TEST(CudaArch, RefusalNamesTheDeviceAndTheList) {
  CudaArchList h = parse_cuda_architectures("90");
  EXPECT_EQ(cuda_device_refusal(0, "NVIDIA H100", 9, 0, h), "");
  std::string why = cuda_device_refusal(1, "NVIDIA A100-SXM4-80GB", 8, 0, h);
  EXPECT_NE(why.find("CUDA device 1 (NVIDIA A100-SXM4-80GB, compute capability 8.0)"), std::string::npos) << why;
  EXPECT_NE(why.find("built for 90"), std::string::npos) << why;
  EXPECT_NE(why.find("including 80"), std::string::npos) << why;
  EXPECT_EQ(cuda_device_refusal(0, "anything", 3, 0, parse_cuda_architectures("native")), "") << "unknown: trusted";
}

}  // namespace
}  // namespace tensord
